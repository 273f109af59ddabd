package decision_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/contextos/contextos/decision"
	"github.com/contextos/contextos/decision/decisiontest"
	"github.com/contextos/contextos/internal/canon"
	"github.com/contextos/contextos/internal/fixture"
	"github.com/contextos/contextos/pack"
)

// sealedLog writes a closed store of three records and returns its path
// and the log's bytes.
func sealedLog(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "records.jsonl")
	s, err := decision.OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dr_1", "dr_2", "dr_3"} {
		if _, err := s.Append(ctx, decisiontest.Sample(id, decision.Decided)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// openStore opens path and registers its Close.
func openStore(t *testing.T, path string) *decision.FileStore {
	t.Helper()
	s, err := decision.OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// lineStarts returns the offset of each line of b.
func lineStarts(b []byte) []int {
	starts := []int{0}
	for i, c := range b {
		if c == '\n' && i+1 < len(b) {
			starts = append(starts, i+1)
		}
	}
	return starts
}

// rechain rewrites every record of the log so its chain verifies again
// (as an attacker without the head would), after edit changed one.
func rechain(t *testing.T, log []byte, edit func(i int, r *decision.Record)) []byte {
	t.Helper()
	var out bytes.Buffer
	prev := decision.GenesisHash
	lines := bytes.Split(bytes.TrimSuffix(log, []byte("\n")), []byte("\n"))
	for i, line := range lines {
		var r decision.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		edit(i, &r)
		r.PrevRecordHash, r.RecordHash = prev, ""
		h, err := decision.Hash(&r)
		if err != nil {
			t.Fatal(err)
		}
		r.RecordHash = h
		prev = h
		b, err := canon.JSON(&r)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// recordWithIdentity validates a sample record whose agent identity is
// set by mutate.
func recordWithIdentity(t *testing.T, mutate func(a *decision.AgentIdentity)) error {
	t.Helper()
	b := fixture.SupportPack()
	p, err := pack.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	r := decisiontest.Sample("dr_1", decision.Escalated)
	r.DecisionVersion = "1.0.0"
	r.AgentIdentity = decision.AgentIdentity{Subject: "agent:contextos/support-refund@1.2.0"}
	mutate(&r.AgentIdentity)
	return decision.Validate(r, &decision.Facts{Pack: p})
}

// Hostile durable audit: a record log cut short, deleted, edited or
// written by a second writer is refused with a typed error, never read as
// if whole; a record that misstates how its identity claim was treated
// does not validate.
// pathRE matches a file path in an error message.
var pathRE = regexp.MustCompile(`(?:/[^\s/:]+)+`)

// pidRE matches the process id a lock's holder is named by.
var pidRE = regexp.MustCompile(`pid [0-9]+`)

func TestHostileDecision(t *testing.T) {
	t.Parallel()
	type outcome struct {
		is   error  // the sentinel the error matches
		as   string // "log", "lock", "chain" or "" for the typed error
		text string // a part of the message
	}
	tests := []struct {
		name string
		run  func(t *testing.T) error
		want outcome
	}{
		{"truncated tail: last record cut off at a line boundary", func(t *testing.T) error {
			path, b := sealedLog(t)
			starts := lineStarts(b)
			os.WriteFile(path, b[:starts[2]], 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrTruncated, "log", "sealed head"}},
		{"truncated inside the sealed records", func(t *testing.T) error {
			path, b := sealedLog(t)
			os.WriteFile(path, b[:len(b)/2], 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrTruncated, "log", "bytes"}},
		{"log emptied", func(t *testing.T) error {
			path, _ := sealedLog(t)
			os.WriteFile(path, nil, 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrTruncated, "log", "3 records"}},
		{"log deleted, head present", func(t *testing.T) error {
			path, _ := sealedLog(t)
			os.Remove(path)
			_, err := decision.OpenFileStore(path, nil)
			if _, serr := os.Stat(path); serr == nil {
				t.Error("opening a deleted log created an empty one")
			}
			return err
		}, outcome{decision.ErrTruncated, "log", "missing"}},
		{"middle line edited", func(t *testing.T) error {
			path, b := sealedLog(t)
			i := lineStarts(b)[1] + bytes.Index(b[lineStarts(b)[1]:], []byte("4200"))
			b[i] = '9'
			os.WriteFile(path, b, 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrChain, "chain", "record 1"}},
		{"middle line edited and rehashed", func(t *testing.T) error {
			path, b := sealedLog(t)
			starts := lineStarts(b)
			mid := rechain(t, b, func(i int, r *decision.Record) {
				if i == 1 {
					r.Outputs["refund_amount_inr"] = 9200.0
				}
			})
			// Keep the first and last stored lines; only the middle is rewritten.
			ms := lineStarts(mid)
			edited := append(append(append([]byte{}, b[:starts[1]]...), mid[ms[1]:ms[2]]...), b[starts[2]:]...)
			os.WriteFile(path, edited, 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrChain, "chain", "prev_record_hash"}},
		{"whole chain rewritten to hide an edit", func(t *testing.T) error {
			path, b := sealedLog(t)
			os.WriteFile(path, rechain(t, b, func(i int, r *decision.Record) {
				if i == 2 {
					r.Outcome = "approved_by_attacker"
				}
			}), 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrHead, "log", ""}},
		{"middle line deleted", func(t *testing.T) error {
			path, b := sealedLog(t)
			starts := lineStarts(b)
			os.WriteFile(path, append(append([]byte{}, b[:starts[1]]...), b[starts[2]:]...), 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrChain, "", ""}},
		{"empty line inserted", func(t *testing.T) error {
			path, b := sealedLog(t)
			starts := lineStarts(b)
			os.WriteFile(path, append(append(append([]byte{}, b[:starts[1]]...), '\n'), b[starts[1]:]...), 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrChain, "", ""}},
		{"two records appended behind the store's back", func(t *testing.T) error {
			path, b := sealedLog(t)
			more := rechain(t, append(append([]byte{}, b...), append(lineOf(b, 2), lineOf(b, 2)...)...), func(i int, r *decision.Record) {
				if i >= 3 {
					r.RecordID = "dr_forged_" + string(rune('a'+i))
				}
			})
			os.WriteFile(path, more, 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrHead, "log", "beyond its sealed head"}},
		{"head deleted, log present", func(t *testing.T) error {
			path, _ := sealedLog(t)
			os.Remove(path + ".head")
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrHead, "log", "no head file"}},
		{"head edited to seal fewer records", func(t *testing.T) error {
			path, _ := sealedLog(t)
			h, _ := os.ReadFile(path + ".head")
			os.WriteFile(path+".head", bytes.Replace(h, []byte(`"records":3`), []byte(`"records":2`), 1), 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrHead, "log", "not sealed"}},
		{"head is not JSON", func(t *testing.T) error {
			path, _ := sealedLog(t)
			os.WriteFile(path+".head", []byte("\x00garbage"), 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrHead, "log", "is not a head"}},
		{"second writer on the same log", func(t *testing.T) error {
			path, _ := sealedLog(t)
			openStore(t, path)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrLocked, "lock", "pid"}},
		{"torn last line from a crash", func(t *testing.T) error {
			path, b := sealedLog(t)
			os.WriteFile(path, append(b, lineOf(b, 2)[:40]...), 0o644)
			_, err := decision.OpenFileStore(path, nil)
			return err
		}, outcome{decision.ErrTornTail, "log", "RepairFileStore"}},
		{"log truncated while the store is open", func(t *testing.T) error {
			path, b := sealedLog(t)
			s := openStore(t, path)
			os.WriteFile(path, b[:lineStarts(b)[2]], 0o644)
			_, err := s.List(ctx, decision.Filter{})
			return err
		}, outcome{decision.ErrTruncated, "log", ""}},
		{"log deleted while the store is open", func(t *testing.T) error {
			path, _ := sealedLog(t)
			s := openStore(t, path)
			os.Remove(path)
			_, err := s.Get(ctx, "dr_1")
			return err
		}, outcome{decision.ErrTruncated, "log", "deleted"}},
		{"record appended by another process while open", func(t *testing.T) error {
			path, b := sealedLog(t)
			s := openStore(t, path)
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			f.Write(lineOf(b, 2))
			f.Close()
			_, err := s.Get(ctx, "dr_1")
			return err
		}, outcome{decision.ErrHead, "log", "did not write"}},
		{"record edited in place while open", func(t *testing.T) error {
			path, b := sealedLog(t)
			s := openStore(t, path)
			b[lineStarts(b)[1]+20] ^= 0x01
			os.WriteFile(path, b, 0o644)
			_, err := s.List(ctx, decision.Filter{RunID: "run_1"})
			return err
		}, outcome{decision.ErrChain, "chain", ""}},
		{"head file replaced while open", func(t *testing.T) error {
			path, _ := sealedLog(t)
			other, _ := sealedLog(t)
			s := openStore(t, path)
			if _, err := s.Append(ctx, decisiontest.Sample("dr_4", decision.Closed)); err != nil {
				t.Fatal(err)
			}
			h, _ := os.ReadFile(other + ".head")
			os.WriteFile(path+".head", h, 0o644)
			return s.Verify(ctx)
		}, outcome{decision.ErrHead, "log", "head file"}},
		{"repair refuses a truncated log", func(t *testing.T) error {
			path, b := sealedLog(t)
			os.WriteFile(path, b[:lineStarts(b)[2]], 0o644)
			_, err := decision.RepairFileStore(path, nil)
			return err
		}, outcome{decision.ErrTruncated, "log", ""}},
		{"repair refuses a deleted log", func(t *testing.T) error {
			path, _ := sealedLog(t)
			os.Remove(path)
			_, err := decision.RepairFileStore(path, nil)
			return err
		}, outcome{decision.ErrTruncated, "log", "backup"}},
		{"repair refuses to run beside a writer", func(t *testing.T) error {
			path, _ := sealedLog(t)
			openStore(t, path)
			_, err := decision.RepairFileStore(path, nil)
			return err
		}, outcome{decision.ErrLocked, "lock", ""}},
		{"repair does not seal a headless log unasked", func(t *testing.T) error {
			path, _ := sealedLog(t)
			os.Remove(path + ".head")
			_, err := decision.RepairFileStore(path, nil)
			return err
		}, outcome{decision.ErrHead, "log", "SealUnsealed"}},
		{"claim_verification outside its enum", func(t *testing.T) error {
			return recordWithIdentity(t, func(a *decision.AgentIdentity) { a.ClaimVerification = "trusted_by_caller" })
		}, outcome{decision.ErrInvalid, "validation", "agent_identity.claim_verification"}},
		{"verified claim without its claim_hash", func(t *testing.T) error {
			return recordWithIdentity(t, func(a *decision.AgentIdentity) { a.ClaimVerification = decision.ClaimVerified })
		}, outcome{decision.ErrInvalid, "validation", "claim_hash"}},
		{"waived claim that carries a claim_hash", func(t *testing.T) error {
			return recordWithIdentity(t, func(a *decision.AgentIdentity) {
				a.ClaimVerification, a.ClaimHash = decision.ClaimWaived, "sha256:"+strings.Repeat("a", 64)
			})
		}, outcome{decision.ErrInvalid, "validation", "waived"}},
		{"append to a closed store", func(t *testing.T) error {
			path, _ := sealedLog(t)
			s, _ := decision.OpenFileStore(path, nil)
			s.Close()
			_, err := s.Append(ctx, decisiontest.Sample("dr_4", decision.Closed))
			return err
		}, outcome{decision.ErrClosed, "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.run(t)
			if err == nil {
				t.Fatalf("no error, want %v", tc.want.is)
			}
			if !errors.Is(err, tc.want.is) {
				t.Fatalf("error %v, want %v", err, tc.want.is)
			}
			switch tc.want.as {
			case "log":
				var le *decision.LogError
				if !errors.As(err, &le) || !errors.Is(err, decision.ErrChain) {
					t.Errorf("error %T %v is not a *LogError matching ErrChain", err, err)
				}
			case "lock":
				var le *decision.LogError
				if !errors.As(err, &le) || le.Kind != decision.ErrLocked || errors.Is(err, decision.ErrChain) {
					t.Errorf("error %T %v is not a *LogError of kind ErrLocked (and not ErrChain)", err, err)
				}
			case "validation":
				var ve *decision.ValidationError
				if !errors.As(err, &ve) || !ve.Has(decision.CodeField) {
					t.Errorf("error %T %v is not a *ValidationError with a field problem", err, err)
				}
			case "chain":
				var ce *decision.ChainError
				if !errors.As(err, &ce) {
					t.Errorf("error %T %v is not a *ChainError", err, err)
				}
			}
			if !strings.Contains(err.Error(), tc.want.text) {
				t.Errorf("error %q does not say %q", err, tc.want.text)
			}
			// No error quotes a record's content. The store's path may
			// name the log (t.TempDir's random digits can hold "4200"),
			// and a lock's holder is named by its pid (pid 24200 did):
			// they are taken out first.
			msg := pidRE.ReplaceAllString(pathRE.ReplaceAllString(err.Error(), "<path>"), "pid <pid>")
			for _, secret := range []string{"refund_amount_inr", "4200", "approved_by_attacker"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error quotes record content %q: %v", secret, err)
				}
			}
		})
	}
}

func lineOf(b []byte, i int) []byte {
	starts := lineStarts(b)
	end := len(b)
	if i+1 < len(starts) {
		end = starts[i+1]
	}
	return append([]byte{}, b[starts[i]:end]...)
}

// A crash-truncated last line is repaired explicitly: the partial bytes
// are cut off (and kept aside), the change is logged, and the store opens
// and appends again with its chain intact.
func TestRepairTornLastLine(t *testing.T) {
	path, b := sealedLog(t)
	partial := lineOf(b, 2)[:57]
	os.WriteFile(path, append(bytes.Clone(b), partial...), 0o644)
	var logs bytes.Buffer
	rep, err := decision.RepairFileStore(path, &decision.RepairOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if rep.RemovedBytes != len(partial) || rep.Records != 3 || !rep.Sealed {
		t.Errorf("repair = %+v", rep)
	}
	kept, err := os.ReadFile(rep.TornPath)
	if err != nil || !bytes.Equal(kept, partial) {
		t.Errorf("torn bytes not kept in %s: %q, %v", rep.TornPath, kept, err)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, b) {
		t.Error("the repaired log is not the sealed log")
	}
	if !strings.Contains(logs.String(), "removed an incomplete last record") || !strings.Contains(logs.String(), rep.RemovedDigest) {
		t.Errorf("repair not logged: %s", logs.String())
	}
	s := openStore(t, path)
	r, err := s.Append(ctx, decisiontest.Sample("dr_4", decision.Closed))
	if err != nil {
		t.Fatal(err)
	}
	last, _ := s.Get(ctx, "dr_3")
	if r.PrevRecordHash != last.RecordHash || s.Verify(ctx) != nil {
		t.Error("an append after the repair does not chain")
	}
	// A log with nothing to repair is left alone.
	s.Close()
	rep, err = decision.RepairFileStore(path, nil)
	if err != nil || rep.Sealed || rep.RemovedBytes != 0 || rep.Records != 4 {
		t.Errorf("repair of a sound log = %+v, %v", rep, err)
	}
}

// A record appended and synced whose head a crash kept from being sealed
// is sealed on the next open, and the open says so in the log.
func TestOpenSealsTheRecordACrashLeftUnsealed(t *testing.T) {
	path, b := sealedLog(t)
	head, _ := os.ReadFile(path + ".head")
	s := openStore(t, path)
	if _, err := s.Append(ctx, decisiontest.Sample("dr_4", decision.Closed)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.WriteFile(path+".head", head, 0o644) // the crash: the new head never landed
	var logs bytes.Buffer
	s2, err := decision.OpenFileStore(path, &decision.FileStoreOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := s2.Head(); got.Records != 4 || !strings.Contains(logs.String(), "sealed the record a crash left") {
		t.Errorf("head %+v, logs %s", got, logs.String())
	}
	if err := s2.Verify(ctx); err != nil {
		t.Error(err)
	}
	_ = b
}

// A headless log (written before heads were kept) is sealed only when an
// operator asks, after its chain verifies.
func TestRepairSealsAHeadlessLogWhenAsked(t *testing.T) {
	path, _ := sealedLog(t)
	os.Remove(path + ".head")
	rep, err := decision.RepairFileStore(path, &decision.RepairOptions{SealUnsealed: true})
	if err != nil || !rep.Sealed || rep.Records != 3 {
		t.Fatalf("repair = %+v, %v", rep, err)
	}
	openStore(t, path)
}

// The lock is released on Close (and when opening fails), so the log can
// be opened again.
func TestLockReleased(t *testing.T) {
	path, b := sealedLog(t)
	s, err := decision.OpenFileStore(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.WriteFile(path, b[:10], 0o644)
	if _, err := decision.OpenFileStore(path, nil); !errors.Is(err, decision.ErrTruncated) {
		t.Fatalf("open of a truncated log = %v", err)
	}
	os.WriteFile(path, b, 0o644)
	s = openStore(t, path)
	if err := s.Verify(context.Background()); err != nil {
		t.Error(err)
	}
}

// The identity fixture of the hostile record cases validates as it is, so
// each case fails for the reason it names.
func TestRecordIdentityFixtureValidates(t *testing.T) {
	if err := recordWithIdentity(t, func(*decision.AgentIdentity) {}); err != nil {
		t.Fatal(err)
	}
	if err := recordWithIdentity(t, func(a *decision.AgentIdentity) {
		a.ClaimVerification, a.ClaimHash = decision.ClaimVerified, "sha256:"+strings.Repeat("a", 64)
	}); err != nil {
		t.Fatal(err)
	}
	if err := recordWithIdentity(t, func(a *decision.AgentIdentity) { a.ClaimVerification = decision.ClaimWaived }); err != nil {
		t.Fatal(err)
	}
}

// A required evidence item named after a request context member is
// satisfied only by a value JsonLogic calls truthy: "identity_verified": 0
// (or "", [], null) does not verify anyone.
func TestFalsyContextValueSatisfiesNoRequirement(t *testing.T) {
	identityVerified := pack.DecisionSpec{DecisionKey: "k", RequiredEvidence: []string{"identity_verified"}}
	for _, v := range []any{0, 0.0, "", []any{}, nil, false, math.NaN()} {
		f := &decision.Facts{RequestContext: map[string]any{"identity_verified": v}}
		if len(decision.Unsatisfied(identityVerified, f)) == 0 {
			t.Errorf("identity_verified = %#v satisfies the requirement", v)
		}
	}
	for _, v := range []any{true, 1, "yes", []any{1.0}} {
		f := &decision.Facts{RequestContext: map[string]any{"identity_verified": v}}
		if len(decision.Unsatisfied(identityVerified, f)) != 0 {
			t.Errorf("identity_verified = %#v does not satisfy the requirement", v)
		}
	}
}
