package grpctransport_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/transport"
	"github.com/contextos/contextos/transport/grpctransport"
)

// A gRPC tool service that refuses a revoked OAuth2 token with
// Unauthenticated: a refused fresh token is final (auth_invalid); a
// refused cached one is evicted and the attempt is made once more with a
// fresh token, as on the HTTP transports.
func TestOAuth2CachedTokenRefusedIsRetriedOnce(t *testing.T) {
	t.Parallel()
	var exchanges atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := exchanges.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"bearer","expires_in":3600}`, n)
	}))
	t.Cleanup(tokens.Close)

	var seen []string // the bearer of every request the service received
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		auth := md.Get("authorization")
		seen = append(seen, fmt.Sprint(auth)) // the server handles one call at a time here
		if len(auth) != 1 || auth[0] == "Bearer tok-1" {
			return nil, status.Error(codes.Unauthenticated, "token revoked")
		}
		return h(ctx, req)
	}))
	grpctransport.Register(s, transport.ExecutorFunc(func(context.Context, *transport.Request) *transport.Response {
		return &transport.Response{Status: transport.StatusOK, Output: map[string]any{"ok": true}}
	}))
	go s.Serve(lis)
	t.Cleanup(s.Stop)

	a, err := grpctransport.New(transport.Endpoint{Transport: transport.TransportGRPC, URL: "grpc://" + lis.Addr().String(), AllowPrivate: true,
		Auth: &transport.Auth{Profile: transport.ProfileOAuth2ClientCreds, SecretRef: "oauth-app", TokenURL: tokens.URL}},
		&grpctransport.Options{Plaintext: true, Options: transport.Options{
			Secrets: transport.MapSecrets{"oauth-app:client_id": "app", "oauth-app:client_secret": "app-secret"}, Tokens: &transport.TokenCache{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })

	_, err = a.Call(bg, call(1, nil)) // fresh tok-1, refused: final
	if te := toolErr(t, err); te.Code != gateway.CodeAuthInvalid || te.Retryable {
		t.Fatalf("fresh token refused: %+v, want a non-retryable auth_invalid", te)
	}
	if _, err := a.Call(bg, call(2, nil)); err != nil { // cached tok-1, refused, evicted; tok-2 accepted
		t.Fatalf("cached token refused: %v, want the retry with a fresh token to succeed", err)
	}
	if d := cmp.Diff([]string{"[Bearer tok-1]", "[Bearer tok-1]", "[Bearer tok-2]"}, seen); d != "" {
		t.Errorf("bearers the service saw (-want +got):\n%s", d)
	}
	if n := exchanges.Load(); n != 2 {
		t.Errorf("%d token exchanges, want 2", n)
	}
}
