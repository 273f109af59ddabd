package runcontext

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// aliasStrings and aliasInts are the values mutateForAlias sets: valid
// and invalid members of each kind, so that some runs materialize.
var aliasStrings = []string{"", "x", "business", "session", "bogus", "active", "user", "agent", "oauth2", "read_only", "delegated",
	"tenant_acme_prod", "tenant_other", "usr_771", "tok_user_7a", "spiffe://contextos/agents/support", "agent:contextos/support-refund@1.2.0",
	"4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "sha256:" + strings.Repeat("a", 64)}

var aliasInts = []int64{0, -1, 1, 5, 1000, 1 << 53}

// mutateForAlias sets some of v's members (one in rate) to the values
// above, and adds elements to slices and bucket maps.
func mutateForAlias(r *rand.Rand, v reflect.Value, rate, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		if r.IntN(rate) == 0 {
			v.SetString(aliasStrings[r.IntN(len(aliasStrings))])
		}
	case reflect.Int, reflect.Int64:
		if r.IntN(rate) == 0 {
			v.SetInt(aliasInts[r.IntN(len(aliasInts))])
		}
	case reflect.Pointer:
		if r.IntN(rate) == 0 {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			} else {
				v.SetZero()
				return
			}
		}
		if !v.IsNil() {
			mutateForAlias(r, v.Elem(), rate, depth+1)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				mutateForAlias(r, v.Field(i), rate, depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		if r.IntN(rate) == 0 {
			n := reflect.MakeSlice(v.Type(), v.Len()+1+r.IntN(3), v.Len()+4)
			reflect.Copy(n, v)
			v.Set(n)
		}
		for i := range v.Len() {
			mutateForAlias(r, v.Index(i), rate, depth+1)
		}
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.Int && r.IntN(rate) == 0 {
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			k := reflect.ValueOf(aliasStrings[r.IntN(len(aliasStrings))]).Convert(v.Type().Key())
			v.SetMapIndex(k, reflect.ValueOf(int(aliasInts[r.IntN(len(aliasInts))])))
		}
	}
}

// refs adds to seen every address v's pointers, maps and slices with
// capacity refer to, at any depth, with its path. (Strings cannot be
// changed, so they may be shared.)
func refs(v reflect.Value, path string, seen map[uintptr]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		seen[v.Pointer()] = path
		refs(v.Elem(), path+"*", seen)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		seen[v.Pointer()] = path
		for it := v.MapRange(); it.Next(); {
			refs(it.Value(), path+"["+it.Key().String()+"]", seen)
		}
	case reflect.Slice:
		if v.Cap() == 0 {
			return
		}
		seen[v.Pointer()] = path
		for i := range v.Len() {
			refs(v.Index(i), path+"[]", seen)
		}
	case reflect.Interface:
		if !v.IsNil() {
			refs(v.Elem(), path, seen)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() {
				f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			}
			refs(f, path+"."+v.Type().Field(i).Name, seen)
		}
	}
}

// TestMaterializeSharesNothingWithItsInputs: no pointer, map or slice of
// a materialized run context — at any depth — is one of the host run
// context's or the request's, so a caller editing either after
// Materialize cannot change the run's context, nor the run the caller's
// (Materialize copies the host context with clone, not Clone).
func TestMaterializeSharesNothingWithItsInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	baseReq, baseRC := fixtureRequest(t), fixtureRunContext(t)
	ok, rich, reqClaim, reqUser := 0, 0, 0, 0
	for iter := range 6000 {
		req, host := baseReq.Clone(), baseRC.Clone()
		mutateForAlias(r, reflect.ValueOf(req).Elem(), []int{40, 400}[iter%2], 0)
		mutateForAlias(r, reflect.ValueOf(host).Elem(), []int{40, 400}[iter/2%2], 0)
		if iter%5 == 0 {
			host.Agent = AgentIdentity{}
		}
		if iter%3 == 0 {
			host.Metadata = map[string]any{"a": map[string]any{"b": []any{1.0, map[string]any{"c": "d"}}}, "e": []any{"f"}}
			host.Extensions = map[string]json.RawMessage{"x_y": json.RawMessage(`{"z":1}`)}
			host.User.TenureDays = ptr(3)
			host.User.Claims = map[string]json.RawMessage{"dept": json.RawMessage(`"ops"`)}
			host.TraceID = req.Trace.TraceID
			host.TraceContext = &TraceContext{TraceParent: req.Trace.Traceparent()}
			if iter%2 == 1 {
				host.Agent.IdentityClaim = validClaim(host)
			}
		}
		if iter%4 == 1 {
			host.User = UserClaims{}
		}
		if iter%7 < 3 {
			req.Agent.IdentityClaim = validClaim(&RunContext{RunID: host.RunID, SessionID: req.SessionID, TenantID: req.TenantID, User: req.User, Agent: req.Agent})
		}
		m, err := Materialize(req, host, nil)
		if err != nil {
			continue
		}
		ok++
		if host.Metadata != nil {
			rich++
		}
		if req.Agent.IdentityClaim != nil && host.Agent.IdentityClaim == nil && host.Agent.AgentURN != "" {
			reqClaim++
		}
		if host.User.UserID == "" {
			reqUser++
		}
		in := map[uintptr]string{}
		refs(reflect.ValueOf(host).Elem(), "host", in)
		refs(reflect.ValueOf(req).Elem(), "request", in)
		out := map[uintptr]string{}
		refs(reflect.ValueOf(m).Elem(), "run", out)
		for p, path := range out {
			if q, shared := in[p]; shared {
				t.Fatalf("%s shares memory with %s", path, q)
			}
		}
	}
	if ok < 200 || rich < 50 || reqClaim < 50 || reqUser < 50 {
		t.Fatalf("only %d runs materialized (%d with a rich host context, %d taking the request's identity claim, %d its user)", ok, rich, reqClaim, reqUser)
	}
}
