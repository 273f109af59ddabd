package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/contextos/contextos"
	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/server"
)

// Mount the handler under a path of the host's own server: it shares the
// runtime's stores, and every request but the health checks needs a
// bearer token.
func ExampleNew() {
	checkpoints, records := contextos.NewInMemoryCheckpoints(), decision.NewMemoryStore()
	planner := contextos.PlannerFunc(func(context.Context, *contextos.PlanRequest) (*contextos.Plan, error) {
		return nil, errors.New("no model in this example")
	})
	rt, err := contextos.New(planner, pack.NewMemoryRegistry(nil), runcontext.NewStaticKeys(nil),
		&contextos.Options{Checkpoints: checkpoints, Decisions: records})
	if err != nil {
		panic(err)
	}
	auth, err := server.NewHS256Authenticator([]byte("a shared secret of at least 32 bytes"), nil)
	if err != nil {
		panic(err)
	}
	h, err := server.New(rt, server.Stores{Checkpoints: checkpoints, Records: records}, &server.Options{Authenticator: auth, BasePath: "/contextos"})
	if err != nil {
		panic(err)
	}
	defer h.Close(context.Background())
	mux := http.NewServeMux()
	mux.Handle("/contextos/", http.StripPrefix("/contextos", h))

	for _, path := range []string{"/contextos/readyz", "/contextos/v1/approvals"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		fmt.Println(path, rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// /contextos/readyz 200 application/json
	// /contextos/v1/approvals 401 application/problem+json
}

// A receiver checks a pause webhook's signature as the Standard Webhooks
// specification says; SignWebhook is what the service sends.
func ExampleSignWebhook() {
	key, err := server.ParseWebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	ts := time.Unix(1614265330, 0).Unix()
	fmt.Println(server.SignWebhook(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", ts, []byte(`{"test": 2432232314}`)))
	// Output: v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}
