package transport

import (
	"testing"

	"github.com/contextos/contextos/gateway"
)

// TestCheckVersion: v1 in any case and with surrounding space, or no
// version, is v1; anything else is refused as invalid_input.
func TestCheckVersion(t *testing.T) {
	for _, v := range []string{"", "v1", "V1", " v1", "v1 ", "\tV1\n", " "} {
		if te := checkVersion(v); te != nil {
			t.Errorf("checkVersion(%q) = %v", v, te)
		}
	}
	for _, v := range []string{"v2", "1", "v1.1", "v 1", "vv1", "v1\x00", "ｖ1"} {
		te := checkVersion(v)
		if te == nil || te.Code != gateway.CodeInvalidInput || te.Details["field"] != "tool_contract_version" {
			t.Errorf("checkVersion(%q) = %v", v, te)
		}
	}
}
