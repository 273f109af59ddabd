package transport_test

import (
	"net/http"
	"testing"

	"github.com/contextos/contextos/transport"
)

// TestAdaptersRefuseRepliesSpellingAMemberTwice: a reply naming its
// status (or another member) twice under spellings encoding/json reads as
// one is refused by every HTTP transport as a duplicated member is, and
// never taken for an ok result: not by the external transport (a
// contract reply), nor by the plain http transport, which takes a JSON
// object that is no contract response for the tool's output.
func TestAdaptersRefuseRepliesSpellingAMemberTwice(t *testing.T) {
	for _, body := range []string{
		`{"status":"ok","Status":"error","error":{"code":"permission_denied"}}`,
		`{"status":"error","Status":"ok","output":{"result":"refund issued"}}`,
		`{"status":"error","error":{"code":"timeout","retryable":false,"Retryable":true}}`,
		`{"status":"ok","output":{"result":"A"},"Output":{"result":"B"}}`,
	} {
		for _, mode := range []string{transport.TransportHTTP, transport.TransportExternal} {
			ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 200, body })
			out, err := newAdapter(t, transport.Endpoint{Transport: mode, URL: ts.URL}, nil).Call(bg, call(1))
			if err == nil {
				t.Errorf("%s %s: accepted: %+v", mode, body, out)
				continue
			}
			// As for a duplicated member: the plain transport's strict
			// refusal is not retryable, the external one's invalid
			// contract response is.
			if te := toolErr(t, err); te.Retryable != (mode == transport.TransportExternal) {
				t.Errorf("%s %s: %v, retryable %v", mode, body, te, te.Retryable)
			}
		}
	}
	// A plain object with one spelling of each member, or none of the
	// contract's, is still the http transport's output.
	for _, body := range []string{`{"Status":"ok","a":1}`, `{"Output":1,"output":2}`} {
		ts := newToolServer(t, func(int, *http.Request, []byte) (int, string) { return 200, body })
		if _, err := newAdapter(t, transport.Endpoint{Transport: transport.TransportHTTP, URL: ts.URL}, nil).Call(bg, call(1)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}
