package decision

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/deepcheck"
)

// TestSealOnceIsSealTwice holds seal's one encoding to the two it saves:
// on every record (random ones, with and without a replay member, a full
// one, ones whose outputs hold the placeholder member itself, ones with no
// canonical form), seal gives the record, the bytes and the error the
// digest-then-encode reference gives.
func TestSealOnceIsSealTwice(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 2))
	var recs []*Record
	for i := range 3000 {
		r := randomRecord(rng)
		if i%10 != 0 {
			r.BudgetUsage.WallClockMS %= 1 << 40 // most with a canonical form
		}
		if i%50 == 5 {
			r.Rationale.Summary = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz" // the placeholder's letter
		}
		recs = append(recs, r)
	}
	full := validRecordForCycle()
	deepcheck.Fill(reflect.ValueOf(full).Elem())
	recs = append(recs, full)
	for _, outputs := range []map[string]any{
		{"record_hash": hashPlaceholder},
		{"x": map[string]any{"record_hash": hashPlaceholder}},
		{"record_hash": hashPlaceholder, "y": []any{map[string]any{"record_hash": hashPlaceholder}}},
		{"s": placeholderMember, "t": "," + placeholderMember + ","},
	} {
		for _, replay := range []bool{false, true} {
			r := validRecordForCycle()
			r.Outputs = outputs
			if replay {
				r.SetReplayPacketID("rp_1")
			}
			recs = append(recs, r)
		}
	}
	fallbacks, failures := 0, 0
	for i, r := range recs {
		for _, prev := range []string{GenesisHash, "sha256:" + fmt.Sprintf("%064x", i)} {
			got, gotBytes, gotErr := seal(r, prev)
			want, wantBytes, wantErr := sealReference(r, prev)
			if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
				t.Fatalf("record %d: seal error %v, the reference's %v", i, gotErr, wantErr)
			}
			if gotErr != nil {
				failures++
				continue
			}
			if !bytes.Equal(gotBytes, wantBytes) || !reflect.DeepEqual(got, want) {
				t.Fatalf("record %d: seal\n%s\n%+v\nthe reference\n%s\n%+v", i, gotBytes, got, wantBytes, want)
			}
			c, err := cloneRecord(r)
			if err != nil {
				t.Fatal(err)
			}
			normalize(c)
			c.PrevRecordHash = prev
			if _, ok, _ := sealOnce(c); !ok {
				fallbacks++
			}
		}
	}
	if fallbacks < 100 || fallbacks > 200 || failures == 0 || failures > 4000 {
		t.Fatalf("%d records took the two encodings and %d had no canonical form: the cases do not reach every path", fallbacks, failures)
	}
}

// sealReference is seal as it was before sealOnce: clone, normalize,
// digest without the hashes, set them, encode.
func sealReference(r *Record, prev string) (*Record, []byte, error) {
	c, err := cloneRecord(r)
	if err != nil {
		return nil, nil, err
	}
	normalize(c)
	c.PrevRecordHash = prev
	return sealTwice(c)
}

// BenchmarkSeal is seal (one canonical encoding) beside the reference
// (two) on a record with a replay member.
func BenchmarkSeal(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	r := randomRecord(rng)
	for _, ok := copyRecord(r); !ok || r.Outputs == nil || len(r.Approvals) == 0 || len(r.PolicyDecisions) == 0 || !sealable(r); _, ok = copyRecord(r) {
		r = randomRecord(rng)
	}
	r.SetReplayPacketID("rp_1")
	for _, s := range []struct {
		name string
		seal func(*Record, string) (*Record, []byte, error)
	}{{"once", seal}, {"twice", sealReference}} {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.seal(r, GenesisHash); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func sealable(r *Record) bool {
	_, _, err := seal(r, GenesisHash)
	return err == nil
}
