package transport

import (
	"errors"
	"strings"
	"testing"
)

// TestReplyRefusesMembersEncodingJSONFoldTogether: encoding/json matches
// a struct's member names case-insensitively (Unicode simple folding:
// "Status", "STATUS", "ſtatus" are all status) and keeps the last, so a
// reply naming one member twice under two spellings reads as its last
// spelling, while a reader that matches names exactly reads the first:
// which value the tool meant cannot be known, as for a duplicated member
// (wire.Strict). DecodeResponse refuses such a reply, at the top level and
// in usage, trace and error, naming the member and never echoing a
// spelling; a single spelling of each member is read as before.
func TestReplyRefusesMembersEncodingJSONFoldTogether(t *testing.T) {
	refused := []struct{ doc, member string }{
		{`{"status":"ok","Status":"error","error":{"code":"x"}}`, "status"},
		{`{"STATUS":"ok","status":"error"}`, "status"},
		{`{"status":"ok","ſtatus":"error"}`, "status"},
		{`{"status":"ok","output":{"result":"A"},"OUTPUT":{"result":"B"}}`, "output"},
		{`{"status":"ok","Output":{"result":"A"},"output":{"result":"B"}}`, "output"},
		{`{"status":"ok","output":{"result":"1"},"result_encoding":"json","Result_Encoding":""}`, "result_encoding"},
		{`{"status":"error","error":{"code":"timeout","retryable":false,"Retryable":true}}`, "error.retryable"},
		{`{"status":"error","Error":{"code":"timeout"},"error":{"code":"x"}}`, "error"},
		{`{"status":"ok","usage":{"attempt":1,"ATTEMPT":2}}`, "usage.attempt"},
		{`{"status":"ok","trace":{"trace_id":"a","Trace_ID":"b"}}`, "trace.trace_id"},
		{`{"status":"ok","Usage":{"duration_ms":1,"Duration_MS":2}}`, "usage.duration_ms"},
	}
	for _, c := range refused {
		doc, member := c.doc, c.member
		_, err := DecodeResponse([]byte(doc))
		if err == nil {
			t.Errorf("%s: accepted", doc)
			continue
		}
		if !errors.Is(err, ErrContract) || !strings.Contains(err.Error(), member) {
			t.Errorf("%s: %v, not a contract error naming %s", doc, err, member)
		}
		for _, spelling := range []string{"Status", "STATUS", "ſtatus", "OUTPUT", "Output", "Retryable", "ATTEMPT", "Trace_ID", "Duration_MS", "Result_Encoding"} {
			if strings.Contains(err.Error(), spelling) {
				t.Errorf("%s: the error %q echoes a spelling of the reply", doc, err)
			}
		}
		var r Response
		if err := decodeInto([]byte(doc), &r, true); err == nil {
			t.Errorf("%s: the gRPC codec's reading accepts it", doc)
		}
	}
	// One spelling of each member: read as encoding/json reads it.
	for _, c := range []struct{ doc, status string }{{`{"Status":"OK"}`, "ok"}, {`{"ſtatus":"error","Error":{"Code":"x"}}`, "error"},
		{`{"status":"ok","Usage":{"Attempt":2},"output":{"a":1,"A":2}}`, "ok"}} {
		doc, status := c.doc, c.status
		r, err := DecodeResponse([]byte(doc))
		if err != nil || r.Status != status {
			t.Errorf("%s: %+v, %v", doc, r, err)
		}
	}
}
