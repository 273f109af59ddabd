package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"testing"
)

// TestNewPostIsNewRequest: the adapter's POST is the request
// http.NewRequestWithContext makes for the endpoint URL: every field
// alike (the body and GetBody compared by what they read, and the body's
// type, which net/http looks through to find an in-memory reader), for
// a body and for an empty one.
func TestNewPostIsNewRequest(t *testing.T) {
	ctx := context.Background()
	compared := 0
	for _, raw := range []string{"http://127.0.0.1:8080", "https://tools.example.com/v1/run?x=1&y=%20#frag", "http://tools.example.com:/p",
		"http://[::1]:/p", "http://[::1]/p", "HTTP://Tools.Example.COM/a%2Fb/c", "http://h/%zz", " http://h/", "http://h/p;q",
		"http://user:pass@h/p", "http://h/p?", "http://h/p#", "http://h/a b"} {
		a, err := NewAdapter(Endpoint{Transport: TransportExternal, URL: raw, AllowPrivate: true}, nil)
		if err != nil {
			continue // an endpoint the adapter refuses is never posted to
		}
		for _, body := range [][]byte{[]byte(`{"a":1}`), {}, nil} {
			want, wantErr := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(body))
			got, gotErr := a.newPost(ctx, body)
			if (wantErr != nil) != (gotErr != nil) {
				t.Fatalf("%s: error %v, NewRequest's %v", raw, gotErr, wantErr)
			}
			if wantErr != nil {
				continue
			}
			if got.URL == a.url {
				t.Fatalf("%s: the request holds the adapter's URL", raw)
			}
			if reflect.TypeOf(got.Body) != reflect.TypeOf(want.Body) || (got.Body == http.NoBody) != (want.Body == http.NoBody) {
				t.Fatalf("%s %q: body %T, NewRequest's %T", raw, body, got.Body, want.Body)
			}
			readAll(t, got.Body, body)
			for _, r := range []*http.Request{got, want} {
				gb, err := r.GetBody()
				if err != nil {
					t.Fatal(err)
				}
				readAll(t, gb, body)
				gb, _ = r.GetBody() // again: each gives the whole body
				readAll(t, gb, body)
				r.Body, r.GetBody = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: request %+v\nNewRequest's %+v", raw, got, want)
			}
			compared++
		}
	}
	if compared < 30 {
		t.Fatalf("only %d requests compared", compared)
	}
}

// readAll reads r to its end and wants body.
func readAll(t *testing.T, r io.Reader, body []byte) {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(b, body) {
		t.Fatalf("the body reads %q (%v), want %q", b, err, body)
	}
}
