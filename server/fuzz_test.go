package server

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/contextos/contextos/internal/fixture"
)

// decodeRun never panics on outside input; what it accepts has a run id
// derived by the service.
func FuzzDecodeRun(f *testing.F) {
	f.Add([]byte(`{"request": ` + string(fixture.Invoke()) + `}`))
	f.Add([]byte(`{"request": ` + string(fixture.Invoke()) + `, "run_context": ` + string(fixture.RunContext()) + `}`))
	f.Add([]byte(`{"request": {}, "run_context": {"run_id": "run_x"}}`))
	f.Add([]byte(`{"request": 1}`))
	f.Add([]byte(`{"request": {"request_id": "req_1"}, "request": {}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, rc, aerr := decodeRun(b)
		if aerr != nil {
			if aerr.Status != 400 || aerr.Code != CodeInvalidRequest {
				t.Fatalf("refusal %d %s", aerr.Status, aerr.Code)
			}
			return
		}
		if req == nil || rc == nil || !strings.HasPrefix(rc.RunID, "run_") {
			t.Fatalf("accepted without a derived run id: %+v", rc)
		}
	})
}

// A decision body is read strictly and checked without panicking.
func FuzzDecisionBody(f *testing.F) {
	for _, s := range []string{`{"decision":"approve","action_digest":"sha256:00"}`, `{"decision":"deny","reason":"no","action_digest":"sha256:00"}`, `{"decision":"approve"}`, `{"decision":"approve","action_digest":""}`,
		`{"decision":"approve","approver":"x"}`, `{"reason":"\u0000"}`, `[]`, `{"decision":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d decisionBody
		if aerr := decodeStrict(b, &d); aerr != nil {
			return
		}
		if aerr := d.check(); aerr == nil && d.Decision != DecisionApprove && d.Decision != DecisionDeny {
			t.Fatalf("accepted decision %q", d.Decision)
		} else if aerr == nil && d.ActionDigest == "" {
			t.Fatal("accepted a decision naming no pause")
		}
	})
}

// A bearer token's claims are read without panicking, and a principal
// always has a subject and a tenant.
func FuzzTokenClaims(f *testing.F) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	hdr := enc(`{"alg":"HS256","typ":"JWT"}`)
	for _, c := range []string{`{"sub":"a","tenant_id":"t","roles":["r"]}`, `{"sub":"a","tenant_id":"t","roles":"r s"}`, `{"sub":1}`, `{"sub":"a","tenant_id":"t","exp":1}`, `[]`, `{"roles":[1]}`} {
		f.Add(hdr + "." + enc(c) + ".c2ln")
	}
	f.Add("a.b")
	a := &devAuth{opts: (&JWTOptions{Now: func() time.Time { return time.Unix(1_700_000_000, 0) }}).withDefaults()}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := a.Authenticate(context.Background(), tok)
		if err != nil {
			if !errors.Is(err, ErrUnauthenticated) {
				t.Fatalf("error %v does not match ErrUnauthenticated", err)
			}
			if len(tok) > 8 && strings.Contains(err.Error(), tok) {
				t.Fatal("the error echoes the token")
			}
			return
		}
		if strings.TrimSpace(p.Subject) == "" || strings.TrimSpace(p.TenantID) == "" {
			t.Fatalf("principal %+v", p)
		}
	})
}
