package pack_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"context"
	"github.com/contextos/contextos/pack"
	"github.com/contextos/contextos/pack/packtest"
)

// Hostile packs: a redaction rule nobody knows is refused at validation
// with the rule and its path, and secrets and raw PII written every way
// are found by the scanner (gate security), which never echoes them.
func TestHostilePackValidation(t *testing.T) {
	t.Parallel()
	const card = "4111111111111111"
	host := &pack.ValidateOptions{RedactionRules: []string{"hostile_test_employee_id"}}
	for _, c := range []struct {
		name   string
		mutate func(p *pack.Pack)
		code   pack.Code // the problem wanted, at path; "" for a pack that validates
		path   string
		leak   string // must not appear in the error
	}{
		{"unknown rule iban2 refused", func(p *pack.Pack) {
			p.PolicyLayer.Guardrails.RedactionRules = append(p.PolicyLayer.Guardrails.RedactionRules, "iban2")
		}, pack.CodeUnknownRedactionRule, "policy_layer.guardrails.redaction_rules[2]", ""},
		{"rule named in the wrong case refused", func(p *pack.Pack) { p.PolicyLayer.Guardrails.RedactionRules = []string{"IBAN"} },
			pack.CodeUnknownRedactionRule, "policy_layer.guardrails.redaction_rules[0]", ""},
		{"every built-in rule accepted", func(p *pack.Pack) {
			p.PolicyLayer.Guardrails.RedactionRules = []string{"credit_card", "pan", "iban", "email", "phone", "ssn", "secret"}
		}, "", "", ""},
		{"registered host rule accepted", func(p *pack.Pack) {
			p.PolicyLayer.Guardrails.RedactionRules = []string{"pan", "hostile_test_employee_id"}
		}, "", "", ""},
		{"iban with spaces", func(p *pack.Pack) {
			p.BusinessContext.NonNegotiables = append(p.BusinessContext.NonNegotiables, "pay DE89 3704 0044 0532 0130 00")
		},
			pack.CodePII, "business_context.non_negotiables[2]", "DE89 3704"},
		{"fullwidth card", func(p *pack.Pack) {
			p.PackMeta.Description = "test card ４１１１１１１１１１１１１１１１"
		},
			pack.CodePII, "pack_meta.description", "４１１１"},
		{"dotted card", func(p *pack.Pack) { p.PackMeta.Metadata = map[string]any{"example": "4111.1111.1111.1111"} },
			pack.CodePII, "pack_meta.metadata.example", "4111.1111"},
		{"card as JSON number", func(p *pack.Pack) { p.PackMeta.Metadata = map[string]any{"example": 4111111111111111.0} },
			pack.CodePII, "pack_meta.metadata.example", card},
		{"card as a member name", func(p *pack.Pack) { p.PackMeta.Metadata = map[string]any{card: "test"} },
			pack.CodePII, "pack_meta.metadata.[REDACTED]", card},
		{"base64 of an API key", func(p *pack.Pack) {
			p.PackMeta.Metadata = map[string]any{"blob": base64.StdEncoding.EncodeToString([]byte("AKIAIOSFODNN7EXAMPLE"))}
		}, pack.CodeSecret, "pack_meta.metadata.blob", "QUtJQUlPU0ZPRE5ON0VYQU1QTEU="},
		{"member named db_password", func(p *pack.Pack) { p.PackMeta.Metadata = map[string]any{"db_password": "hunter2"} },
			pack.CodeSecret, "pack_meta.metadata.db_password", "hunter2"},
		{"password=hunter2 in text", func(p *pack.Pack) { p.PackMeta.Description = "connect with user=bob password=hunter2" },
			pack.CodeSecret, "pack_meta.description", "hunter2"},
		{"credentials in a URL", func(p *pack.Pack) { p.PackMeta.Metadata = map[string]any{"dsn": "postgres://admin:hunter2@db/app"} },
			pack.CodeSecret, "pack_meta.metadata.dsn", "hunter2"},
		// A key pasted where an id or a name belongs is refused by the
		// check that reads that member, and its message names the member
		// without quoting the key.
		{"a key as a redaction rule", func(p *pack.Pack) {
			p.PolicyLayer.Guardrails.RedactionRules = []string{"ghp_" + strings.Repeat("Ab1", 12)}
		}, pack.CodeUnknownRedactionRule, "policy_layer.guardrails.redaction_rules[0]", "ghp_Ab1Ab1"},
		{"a key as a permission's adapter", func(p *pack.Pack) {
			p.ToolingLayer.Permissions[0].AdapterID = "sk_live_" + strings.Repeat("q7", 12)
		}, pack.CodePermissionWithoutAdapter, "tooling_layer.permissions[0].adapter_id", "sk_live_q7q7"},
		// The value quoted is clipped to 64 bytes; a key longer than
		// that is redacted before the cut, which would leave a prefix
		// no detector knows (a SendGrid key is 69 characters).
		{"a long key as a redaction rule", func(p *pack.Pack) {
			p.PolicyLayer.Guardrails.RedactionRules = []string{"SG." + strings.Repeat("a", 22) + "." + strings.Repeat("Zq9", 14) + "Z"}
		}, pack.CodeUnknownRedactionRule, "policy_layer.guardrails.redaction_rules[0]", "Zq9Zq9Zq9"},
		{"invalid-checksum iban left alone", func(p *pack.Pack) { p.PackMeta.Description = "reference DE89 3704 0044 0532 0130 01" }, "", "", ""},
		{"secret and token references left alone", func(p *pack.Pack) {
			p.PackMeta.Metadata = map[string]any{"secret_ref": "vault://payments/key", "token_ref": "secret://orders", "max_tokens": "512"}
		}, "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := mutated(t, c.mutate)
			err := pack.Validate(p, host)
			if c.code == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var ve *pack.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, pack.ErrInvalid) || !ve.HasAt(c.code, c.path) {
				t.Fatalf("Validate = %v, want a %s problem at %s", err, c.code, c.path)
			}
			if c.leak != "" && strings.Contains(err.Error(), c.leak) {
				t.Errorf("the error echoes %q: %v", c.leak, err)
			}
		})
	}
}

// An overlay naming an unknown rule is refused; the whole document path
// through DecodeAndValidate refuses it too, naming the rule.
func TestHostileRedactionRuleDocuments(t *testing.T) {
	o := baseOverlay()
	o.Guardrails = pack.Guardrails{RedactionRules: []string{"iban2"}}
	if _, _, err := pack.ApplyOverlay(canonical(t), o, nil); !errors.Is(err, pack.ErrOverlay) || !strings.Contains(err.Error(), `"iban2"`) {
		t.Errorf("ApplyOverlay with rule iban2 = %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(readFile(t, "ctxpack.support-1.0.0.json"), &doc); err != nil {
		t.Fatal(err)
	}
	g := doc["policy_layer"].(map[string]any)["guardrails"].(map[string]any)
	g["redaction_rules"] = []any{"pan", "aadhaar"}
	data, _ := json.Marshal(doc)
	_, err := pack.DecodeAndValidate(data, nil)
	var ve *pack.ValidationError
	if !errors.As(err, &ve) || !ve.HasAt(pack.CodeUnknownRedactionRule, "policy_layer.guardrails.redaction_rules[1]") || !strings.Contains(err.Error(), `"aadhaar"`) {
		t.Errorf("DecodeAndValidate = %v", err)
	}
}

// The host's redaction rule names are known only where they are passed:
// validation with them accepts a pack naming one, validation without them
// (or with other names) refuses it, and an invalid name is refused with
// ErrRedactionRuleName before anything is validated.
func TestValidateOptionsRedactionRules(t *testing.T) {
	t.Parallel()
	const rule = "employee_id"
	p := mutated(t, func(p *pack.Pack) {
		p.PolicyLayer.Guardrails.RedactionRules = []string{"pan", rule}
	})
	const at = "policy_layer.guardrails.redaction_rules[1]"
	for _, c := range []struct {
		name string
		opts *pack.ValidateOptions
		code string // the problem wanted at path; "" for none
		bad  bool   // ErrRedactionRuleName wanted
	}{
		{"nil options: built-ins only", nil, pack.CodeUnknownRedactionRule, false},
		{"zero options: built-ins only", &pack.ValidateOptions{}, pack.CodeUnknownRedactionRule, false},
		{"other host names", &pack.ValidateOptions{RedactionRules: []string{"employee_no"}}, pack.CodeUnknownRedactionRule, false},
		{"the host name", &pack.ValidateOptions{RedactionRules: []string{"employee_no", rule}}, "", false},
		{"name with a space", &pack.ValidateOptions{RedactionRules: []string{rule, "has space"}}, "", true},
		{"empty name", &pack.ValidateOptions{RedactionRules: []string{""}}, "", true},
		{"name too long", &pack.ValidateOptions{RedactionRules: []string{strings.Repeat("x", 65)}}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := pack.Validate(p, c.opts)
			switch {
			case c.bad:
				if !errors.Is(err, pack.ErrRedactionRuleName) || errors.Is(err, pack.ErrInvalid) {
					t.Errorf("Validate = %v, want ErrRedactionRuleName", err)
				}
			case c.code == "":
				if err != nil {
					t.Errorf("Validate = %v, want nil", err)
				}
			default:
				var ve *pack.ValidationError
				if !errors.As(err, &ve) || !ve.HasAt(pack.Code(c.code), at) {
					t.Errorf("Validate = %v, want a %s problem at %s", err, c.code, at)
				}
			}
		})
	}
	// Per instance: a registry given the name stores the signed pack, one
	// without it refuses it, whatever was given to the other.
	host := &pack.ValidateOptions{RedactionRules: []string{rule}}
	s := packtest.NewSigner(9)
	signed, err := pack.Sign(p, s.Kid, s.Key, host)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pack.NewMemoryRegistry(host).Put(ctx, signed); err != nil {
		t.Errorf("Put with the host's names = %v", err)
	}
	if _, err := pack.NewMemoryRegistry(nil).Put(ctx, signed); !errors.Is(err, pack.ErrInvalid) {
		t.Errorf("Put without the host's names = %v, want ErrInvalid", err)
	}
	if _, err := pack.Verify(ctx, signed, keysFor(s), nil); !errors.Is(err, pack.ErrInvalid) {
		t.Errorf("Verify without the host's names = %v, want ErrInvalid", err)
	}
	if _, err := pack.Verify(ctx, signed, keysFor(s), host); err != nil {
		t.Errorf("Verify with the host's names = %v", err)
	}
	// Bad options are the host's fault, reported as such before any work.
	bad := &pack.ValidateOptions{RedactionRules: []string{"has space"}}
	if err := bad.Check(); !errors.Is(err, pack.ErrRedactionRuleName) {
		t.Errorf("Check = %v, want ErrRedactionRuleName", err)
	}
	if err := host.Check(); err != nil {
		t.Errorf("Check of valid options = %v", err)
	}
	if _, err := pack.Verify(ctx, signed, keysFor(s), bad); !errors.Is(err, pack.ErrRedactionRuleName) || errors.Is(err, pack.ErrSignature) {
		t.Errorf("Verify with bad options = %v, want ErrRedactionRuleName and not ErrSignature", err)
	}
	if _, err := pack.NewMemoryRegistry(bad).Put(ctx, signed); !errors.Is(err, pack.ErrRedactionRuleName) || errors.Is(err, pack.ErrSignature) {
		t.Errorf("Put with bad options = %v, want ErrRedactionRuleName and not ErrSignature", err)
	}
}

// Hostile refs: a registry that does not hold a ref or pack id refuses it
// with ErrNotFound and names it only when it is a pack ref or id an
// operator can read back; one that looks like a secret (a key pasted as a
// pack id) or is not of the ref grammar is never echoed.
func TestHostileRefsNeverEchoed(t *testing.T) {
	t.Parallel()
	const key = "sk-live-hr5packrefsecret0001"
	dir, err := pack.OpenDirRegistry(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	regs := map[string]pack.LifecycleRegistry{"memory": pack.NewMemoryRegistry(nil), "dir": dir}
	for _, c := range []struct {
		name  string
		call  func(r pack.LifecycleRegistry) error
		leak  string // must not appear ("" when the ref must be named)
		name2 string // must appear
	}{
		{name: "Get of a key as a pack id", call: func(r pack.LifecycleRegistry) error {
			_, err := r.Get(ctx, pack.MustParseRef(key+"@1.0.0"))
			return err
		}, leak: key},
		{name: "Versions of a key", call: func(r pack.LifecycleRegistry) error { _, err := r.Versions(ctx, key); return err }, leak: key},
		{name: "Versions of a bearer credential", call: func(r pack.LifecycleRegistry) error {
			_, err := r.Versions(ctx, "Bearer hr5opaquebearer0002")
			return err
		}, leak: "hr5opaquebearer0002"},
		{name: "SetState of a key as a pack id", call: func(r pack.LifecycleRegistry) error {
			_, err := r.SetState(ctx, pack.MustParseRef(key+"@1.0.0"), pack.StatePublished, "")
			return err
		}, leak: key},
		{name: "Review of a key as a pack id", call: func(r pack.LifecycleRegistry) error {
			_, err := r.Review(ctx, pack.MustParseRef(key+"@1.0.0"))
			return err
		}, leak: key},
		{name: "Get of an honest ref names it", call: func(r pack.LifecycleRegistry) error {
			_, err := r.Get(ctx, pack.MustParseRef("support@9.9.9"))
			return err
		}, name2: "support@9.9.9"},
		{name: "Versions of an honest id names it", call: func(r pack.LifecycleRegistry) error { _, err := r.Versions(ctx, "support"); return err }, name2: "support"},
	} {
		for rn, reg := range regs {
			t.Run(c.name+" ("+rn+")", func(t *testing.T) {
				err := c.call(reg)
				if !errors.Is(err, pack.ErrNotFound) {
					t.Fatalf("error = %v, want ErrNotFound", err)
				}
				if c.leak != "" && strings.Contains(err.Error(), c.leak) {
					t.Errorf("error echoes the value: %v", err)
				}
				if c.name2 != "" && !strings.Contains(err.Error(), c.name2) {
					t.Errorf("error = %v, want it to name %s", err, c.name2)
				}
			})
		}
	}
}

// An error that is not a problem list quotes its value through the same
// redaction: a host key pasted into ValidateOptions.RedactionRules is
// refused without being shown.
func TestRedactionRuleNameRefusalHidesAKey(t *testing.T) {
	key := "ghp_" + strings.Repeat("Ab1", 12)
	err := (&pack.ValidateOptions{RedactionRules: []string{key + " x"}}).Check()
	if !errors.Is(err, pack.ErrRedactionRuleName) {
		t.Fatalf("Check = %v, want ErrRedactionRuleName", err)
	}
	if strings.Contains(err.Error(), "Ab1Ab1") {
		t.Errorf("the error echoes the key: %v", err)
	}
}
