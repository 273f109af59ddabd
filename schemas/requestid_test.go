package schemas_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/internal/requestid"
	"github.com/contextos/contextos/runcontext"
	"github.com/contextos/contextos/schemas"
)

// invoke-agent.v1's request_id pattern and maxLength accept exactly what
// runcontext.InvokeRequest.Validate accepts: the safe charset within 128
// bytes and the pre-issue-15 "req_" grammar within 256 bytes, and neither
// a "." or ".." segment nor anything outside the charsets.
func TestRequestIDSchemaAgreesWithValidate(t *testing.T) {
	b := fixture.Invoke()
	ids := []string{
		"req_9f3a12", "123e4567-e89b-12d3-a456-426614174000", "A", "req_",
		strings.Repeat("a", runcontext.MaxRequestIDLen), strings.Repeat("a", runcontext.MaxRequestIDLen+1),
		"req_acme/4711", "req_user@acme.example", "req_/x", "req_acme//x", "req_acme/...", "req_acme/..x", "req_acme/.x",
		"req_" + strings.Repeat("a", requestid.MaxLegacyLen-4), "req_" + strings.Repeat("a", requestid.MaxLegacyLen-3),
		"req_acme/../x", "req_acme/..", "req_acme/.", "req_acme/./x", "../../etc/passwd", "acme/4711", "user@acme.example",
		"req 1", "req_\x00", "req_é", "req\\1", "req_1?x", "req_%2e", `req_"1`, ".hidden", "-rf", "_req", "",
	}
	for _, id := range ids {
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		doc["request_id"] = id
		raw, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		schemaOK := schemas.Validate("invoke-agent", raw) == nil
		req, err := runcontext.DecodeInvokeRequest(raw)
		if err != nil && req != nil {
			t.Fatalf("decode returned both a request and %v", err)
		}
		validateOK := err == nil
		if schemaOK != validateOK {
			t.Errorf("request_id %.40q: schema accepts = %v, Validate accepts = %v", id, schemaOK, validateOK)
		}
	}
}
