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
// http.NewRequestWithContext makes for the endpoint URL.
func TestNewPostIsNewRequest(t *testing.T) {
	ctx := context.Background()
	body := []byte(`{"a":1}`)
	compared := 0
	for _, raw := range []string{"http://127.0.0.1:8080", "https://tools.example.com/v1/run?x=1&y=%20#frag", "http://tools.example.com:/p",
		"http://[::1]:/p", "http://[::1]/p", "HTTP://Tools.Example.COM/a%2Fb/c", "http://h/%zz", " http://h/", "http://h/p;q"} {
		a, err := NewAdapter(Endpoint{Transport: TransportExternal, URL: raw, AllowPrivate: true}, nil)
		if err != nil {
			continue // an endpoint the adapter refuses is never posted to
		}
		want, wantErr := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(body))
		got, gotErr := a.newPost(ctx, body)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("%s: error %v, NewRequest's %v", raw, gotErr, wantErr)
		}
		if wantErr != nil {
			continue
		}
		if !reflect.DeepEqual(got.URL, want.URL) || got.Host != want.Host || got.Method != want.Method || got.ContentLength != want.ContentLength ||
			!reflect.DeepEqual(got.Header, want.Header) || got.Context() != want.Context() {
			t.Fatalf("%s: request %+v\nNewRequest's %+v", raw, got, want)
		}
		gb, _ := got.GetBody()
		b, _ := io.ReadAll(gb)
		if !bytes.Equal(b, body) {
			t.Fatalf("%s: GetBody gives %q", raw, b)
		}
		if got.URL == a.url {
			t.Fatalf("%s: the request holds the adapter's URL", raw)
		}
		compared++
	}
	if compared < 7 {
		t.Fatalf("only %d endpoints compared", compared)
	}
}
