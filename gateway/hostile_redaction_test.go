package gateway_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextos/contextos/gateway"
	"github.com/contextos/contextos/gateway/gatewaytest"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/runcontext"
)

// Hostile tool outputs: sensitive data written every way an adapter can
// write it reaches neither the result nor the transcript, with the pack's
// redaction rules active; ordinary values are left alone.
func TestHostileRedaction(t *testing.T) {
	t.Parallel()
	const card = "4111111111111111"
	for _, c := range []struct {
		name  string
		rules []string
		out   map[string]any // the adapter's output, or
		fail  string         // the adapter's error message
		leaks []string       // must not appear
		keep  []string       // must appear unchanged
	}{
		{name: "card as JSON number", rules: []string{"credit_card"}, out: map[string]any{"pan_number": 4111111111111111.0}, leaks: []string{card, "4.111111111111111e+15"}},
		{name: "card as json.Number", rules: []string{"credit_card"}, out: map[string]any{"n": json.Number("5555555555554444")}, leaks: []string{"5555555555554444"}},
		{name: "card as a number with a fraction", rules: []string{"credit_card"}, out: map[string]any{"n": 41111111111.11111}, leaks: []string{"41111111111.11111", "4.111111111111111e+10"}},
		{name: "card as a huge number", rules: []string{"credit_card"}, out: map[string]any{"n": 4111111111111111e5}, leaks: []string{"4111111111111111", "4.111111111111111e+20"}},
		{name: "amounts with float noise left alone", rules: []string{"credit_card", "pan"}, out: map[string]any{"a": 3.3000000000000003, "b": 0.30000000000000004, "c": 123456.78901234},
			keep: []string{"3.3000000000000003", "0.30000000000000004", "123456.78901234"}},
		{name: "card wrapped in base64 under the card rule", rules: []string{"credit_card"}, out: map[string]any{"blob": "NDExMTExMTExMTExMTExMQ=="}, leaks: []string{"NDExMTExMTExMTExMTExMQ=="}},
		{name: "email wrapped in base64 under the email rule", rules: []string{"email"}, out: map[string]any{"blob": "amFuZS5kb2VAZXhhbXBsZS5jb20="}, leaks: []string{"amFuZS5kb2VAZXhhbXBsZS5jb20="}},
		{name: "card as a map key", rules: []string{"credit_card"}, out: map[string]any{card: map[string]any{"status": "ok"}}, leaks: []string{card}, keep: []string{`"status":"ok"`}},
		{name: "colliding card keys", rules: []string{"credit_card"}, out: map[string]any{card: 1, "5555555555554444": 2}, leaks: []string{card, "5555555555554444"}, keep: []string{`"[REDACTED#2]"`}},
		{name: "fullwidth card", rules: []string{"credit_card"}, out: map[string]any{"note": "card ４１１１１１１１１１１１１１１１"}, leaks: []string{"４１１１１１１１１１１１１１１１"}},
		{name: "dotted card", rules: []string{"pan"}, out: map[string]any{"note": "4111.1111.1111.1111"}, leaks: []string{"4111.1111.1111.1111"}},
		{name: "card glued to letters", rules: []string{"credit_card"}, out: map[string]any{"ref": "card" + card + "x"}, leaks: []string{card}, keep: []string{"card[REDACTED]x"}},
		{name: "iban with spaces", rules: []string{"iban"}, out: map[string]any{"payee": "IBAN DE89 3704 0044 0532 0130 00"}, leaks: []string{"DE89 3704", "0532 0130"}},
		{name: "invalid-checksum iban left alone", rules: []string{"iban"}, out: map[string]any{"ref": "DE89 3704 0044 0532 0130 01"}, keep: []string{"DE89 3704 0044 0532 0130 01"}},
		{name: "ordinary ids, amounts and hashes left alone", rules: []string{"credit_card", "pan", "iban", "email", "phone", "ssn", "secret"},
			out:  map[string]any{"order_id": "ord_881", "amount": 12.5, "at": "2024-01-15T10:30:00Z", "hash": "sha256:96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f", "call": "tool_4111111111111111", "max_tokens": 512},
			keep: []string{"ord_881", "12.5", "2024-01-15T10:30:00Z", "96bee2696c42a756ce877831d9163298675321875a3aeac4c06dad73fc68301f", "tool_4111111111111111", "512"}},
		{name: "email as key and value", rules: []string{"email"}, out: map[string]any{"bob@example.com": "alice@example.org"}, leaks: []string{"bob@example.com", "alice@example.org"}},
		{name: "phone in a note", rules: []string{"phone"}, out: map[string]any{"note": "call +44 20 7946 0958"}, leaks: []string{"7946 0958"}},
		{name: "ssn", rules: []string{"ssn"}, out: map[string]any{"ssn": "123-45-6789"}, leaks: []string{"123-45-6789"}},
		{name: "value of db_password", rules: []string{"secret"}, out: map[string]any{"config": map[string]any{"db_password": "hunter2"}}, leaks: []string{"hunter2"}, keep: []string{"db_password"}},
		{name: "password=hunter2 in text", rules: []string{"secret"}, out: map[string]any{"log": "login user=bob password=hunter2 ok"}, leaks: []string{"hunter2"}, keep: []string{"user=bob", "password="}},
		{name: "base64 of an API key", rules: []string{"secret"}, out: map[string]any{"blob": base64.StdEncoding.EncodeToString([]byte("api_key=sk-live-abcdefghijklmnopqrstuvwxyz"))}, leaks: []string{base64.StdEncoding.EncodeToString([]byte("api_key=sk-live-abcdefghijklmnopqrstuvwxyz"))}},
		{name: "pem private key", rules: []string{"secret"}, out: map[string]any{"key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"}, leaks: []string{"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "BEGIN PRIVATE KEY"}},
		{name: "bearer header echoed in an error", rules: []string{"secret"}, fail: "upstream said 401 for Authorization: Bearer abcdef123456", leaks: []string{"abcdef123456"}},
		{name: "card in an error message", rules: []string{"credit_card"}, fail: "card " + card + " declined", leaks: []string{card}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(fx *fixture, _ *runcontext.RunContext, _ *runcontext.InvokeRequest, _ map[string]gateway.Capability) {
				fx.editPack = func(p *pack.Pack) { p.PolicyLayer.Guardrails.RedactionRules = c.rules }
				fx.orders = gatewaytest.NewScriptedAdapter()
				if c.fail != "" {
					fx.orders.On("lookup").Fail(c.fail)
				} else {
					fx.orders.On("lookup").ReturnOutput(c.out)
				}
			})
			res, err := f.run.Call(ctx, lookupCall())
			if err != nil {
				t.Fatal(err)
			}
			resJSON, _ := json.Marshal(res)
			transcript, _ := json.Marshal(f.recorder.Entries())
			for name, surface := range map[string]string{"result": string(resJSON), "transcript": string(transcript)} {
				for _, leak := range c.leaks {
					if strings.Contains(surface, leak) {
						t.Errorf("the %s holds %q: %s", name, leak, surface)
					}
				}
				for _, k := range c.keep {
					if !strings.Contains(surface, k) {
						t.Errorf("the %s lost %q: %s", name, k, surface)
					}
				}
			}
			if len(c.leaks) > 0 && !res.Metadata.RedactionApplied {
				t.Error("redaction_applied is false")
			}
			if len(c.leaks) == 0 && res.Metadata.RedactionApplied {
				t.Errorf("redaction_applied with nothing to redact: %s", resJSON)
			}
		})
	}
}
