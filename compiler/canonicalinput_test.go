package compiler

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/runcontext"
)

// checkInputWriters holds requestEncoding and runContextEncoding to
// canon.JSON for req and rc.
func checkInputWriters(t *testing.T, req *runcontext.InvokeRequest, rc *runcontext.RunContext) {
	t.Helper()
	checkSame(t, "request", requestEncoding{req}, req)
	checkSame(t, "run context", runContextEncoding{rc}, rc)
}

func fillInputs(data []byte, full, safe bool) (*runcontext.InvokeRequest, *runcontext.RunContext) {
	req, rc := &runcontext.InvokeRequest{}, &runcontext.RunContext{}
	f := &filler{data: data, full: full, safe: safe}
	f.fill(reflect.ValueOf(req).Elem())
	f.fill(reflect.ValueOf(rc).Elem())
	return req, rc
}

// TestInputWritersMatchReflection: the request and run context writers
// write what canon's reflective encoder writes (the bytes request_hash
// and run_context_hash cover), for everything filled (every field of
// every type set, so a field a writer leaves out fails here), for nothing
// filled, for pseudo-random values and for the fixtures' request and run
// context.
func TestInputWritersMatchReflection(t *testing.T) {
	for seed := range uint64(3000) {
		r := rand.New(rand.NewPCG(seed, 41))
		data := make([]byte, 64+r.IntN(2048))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		req, rc := fillInputs(data, seed%4 == 0, seed%3 == 0)
		checkInputWriters(t, req, rc)
	}
	checkInputWriters(t, &runcontext.InvokeRequest{}, &runcontext.RunContext{})
	// Everything filled with safe, valid values and no extension member:
	// the writers themselves write it (no fallback).
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		full := make([]byte, 8192)
		for i := range full {
			full[i] = byte(r.Uint32())
		}
		req, rc := fillInputs(full, true, true)
		req.Extensions, rc.Extensions, req.User.Claims, rc.User.Claims = nil, nil, nil, nil
		checkDirect(t, "request", req, func() ([]byte, error) { return appendRequest(nil, req) })
		checkDirect(t, "run context", rc, func() ([]byte, error) { return appendRunContext(nil, rc) })
		checkInputWriters(t, req, rc)
	}
	req, err := runcontext.DecodeInvokeRequest(fixture.Read(t, "invoke.support-refund.json"))
	if err != nil {
		t.Fatal(err)
	}
	host, err := runcontext.DecodeRunContext(fixture.Read(t, "run-context.support.json"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := runcontext.Materialize(req, host, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkInputWriters(t, req, rc)
	checkInputWriters(t, req, host)
	checkDirect(t, "request", req, func() ([]byte, error) { return appendRequest(nil, req) })
	checkDirect(t, "run context", rc, func() ([]byte, error) { return appendRunContext(nil, rc) })
}

// checkDirect: where canon.JSON encodes v, the writer itself (not its
// fallback to the reflective encoder) writes the same bytes.
func checkDirect(t *testing.T, what string, v any, write func() ([]byte, error)) {
	t.Helper()
	want, err := canon.JSON(v)
	if err != nil {
		return // a map with two keys that are one once made valid UTF-8
	}
	got, err := write()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s written directly: %s, %v; want %s", what, got, err, want)
	}
}

// FuzzInputWriters holds requestEncoding and runContextEncoding to
// canon.JSON for requests and run contexts filled from arbitrary bytes.
func FuzzInputWriters(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add(bytes.Repeat([]byte{0xc8, 0x05, 'a', 0xff, '"', 0x81}, 80))
	f.Add(bytes.Repeat([]byte{7, 11, 13, 200, 4, 0xed, 0xa0, 0x80, 3, 9}, 60))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, mode := range [][2]bool{{false, false}, {true, false}, {true, true}} {
			req, rc := fillInputs(data, mode[0], mode[1])
			checkInputWriters(t, req, rc)
		}
	})
}
