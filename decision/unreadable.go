package decision

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/contextos/contextos/internal/canon"
)

// ErrUnreadable reports a stored record that cannot be decoded as a
// Record, although its link in the chain is intact: a record an earlier
// release sealed with a number a Record cannot hold (a token count beyond
// 2^53−1 written as the nearest double, say). The error is an
// *UnreadableError naming the records.
var ErrUnreadable = errors.New("decision: stored record cannot be read")

// UnreadableError names the stored records a read met that do not decode
// as a Record. It never fails a read of the other records: List returns
// every record it could read together with it, Get returns it for the
// record asked for, and Verify returns it, once the chain itself holds,
// so an operator learns which records to look at. Reasons name the member
// and the type that did not fit, never a stored value.
type UnreadableError struct {
	// Records are the unreadable records, in chain order.
	Records []UnreadableRecord
}

// UnreadableRecord is one stored record that does not decode as a Record.
type UnreadableRecord struct {
	// Index is the record's position in the chain, from 0.
	Index int
	// RecordID is the record's record_id ("" when not even that reads).
	RecordID string
	// Reason says which member did not decode, without its value.
	Reason string
}

// maxNamed is how many records the error message names; Records holds
// them all.
const maxNamed = 5

func (e *UnreadableError) Error() string {
	var b strings.Builder
	if len(e.Records) == 1 {
		b.WriteString("decision: a stored record cannot be read: ")
	} else {
		fmt.Fprintf(&b, "decision: %d stored records cannot be read: ", len(e.Records))
	}
	for i, r := range e.Records {
		if i == maxNamed {
			fmt.Fprintf(&b, "; and %d more", len(e.Records)-maxNamed)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		id := r.RecordID
		if id == "" {
			id = "no record_id"
		}
		fmt.Fprintf(&b, "record %d (%s): %s", r.Index, clipID(id), r.Reason)
	}
	return b.String()
}

// Is matches ErrUnreadable.
func (e *UnreadableError) Is(target error) bool { return target == ErrUnreadable }

// RecordIDs returns the ids of the unreadable records, in chain order.
func (e *UnreadableError) RecordIDs() []string {
	ids := make([]string, len(e.Records))
	for i, r := range e.Records {
		ids[i] = r.RecordID
	}
	return ids
}

// clipID bounds a stored record id in a message.
func clipID(id string) string {
	const max = 128
	if len(id) > max {
		return strings.ToValidUTF8(id[:max], "") + "…"
	}
	return id
}

// storedKeys are the members of a stored record a Store needs without
// decoding the whole record: what it is found by and how it is chained.
// They read from any record whose chain members are strings, also from
// one that does not decode as a Record.
type storedKeys struct {
	RecordID       string `json:"record_id"`
	RunID          string `json:"run_id"`
	TenantID       string `json:"tenant_id"`
	Status         string `json:"status"`
	PrevRecordHash string `json:"prev_record_hash"`
	RecordHash     string `json:"record_hash"`
	Replay         *struct {
		RecordHash string `json:"record_hash"`
	} `json:"replay"`
}

// readKeys reads the storedKeys of a stored record's bytes.
func readKeys(stored []byte) (storedKeys, error) {
	var k storedKeys
	if err := json.Unmarshal(stored, &k); err != nil {
		return storedKeys{}, err
	}
	return k, nil
}

// matchKeys is Filter.Match on the keys of a stored record.
func (f Filter) matchKeys(k storedKeys) bool {
	return (f.RunID == "" || k.RunID == f.RunID) && (f.TenantID == "" || k.TenantID == f.TenantID) && (f.Status == "" || k.Status == string(f.Status))
}

// DecodeStored decodes a stored record's bytes (as a Store's reader does).
// Bytes that do not decode as a Record are an *UnreadableError naming the
// record by its record_id, when that reads, and by index, its position in
// the chain; it is the only error DecodeStored returns.
func DecodeStored(stored []byte, index int) (*Record, error) {
	var r Record
	if err := json.Unmarshal(stored, &r); err != nil {
		return nil, &UnreadableError{Records: []UnreadableRecord{unreadable(stored, index, err)}}
	}
	return &r, nil
}

// unreadable describes the stored record at index that failed to decode
// with err.
func unreadable(stored []byte, index int, err error) UnreadableRecord {
	k, _ := readKeys(stored)
	return UnreadableRecord{Index: index, RecordID: k.RecordID, Reason: unreadableReason(err)}
}

// unreadableReason says what of a stored record did not decode, from
// encoding/json's error, without the stored value (a type error's value
// is a number's digits, a syntax error's a character).
func unreadableReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		what, _, _ := strings.Cut(te.Value, " ")
		if te.Field == "" {
			return fmt.Sprintf("the stored %s does not fit %s", what, te.Type)
		}
		return fmt.Sprintf("%s: the stored %s does not fit %s", te.Field, what, te.Type)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "the stored bytes are not JSON"
	}
	return "a member does not decode as the record's type"
}

// unreadableErr joins the records in errs into one *UnreadableError, or
// nil for none.
func unreadableErr(recs []UnreadableRecord) error {
	if len(recs) == 0 {
		return nil
	}
	return &UnreadableError{Records: recs}
}

// checkLink checks the stored record line (its link in the chain, the
// record at index i) follows prev and returns its record_hash, and, when
// the link holds but the record does not decode as a Record, what did not
// decode (ok false). A link that does not hold is a *ChainError.
func checkLink(line []byte, prev string, i int) (hash string, bad UnreadableRecord, ok bool, err error) {
	var r Record
	if derr := json.Unmarshal(line, &r); derr != nil {
		hash, err := checkRawLink(line, prev, i)
		if err != nil {
			return "", UnreadableRecord{}, false, err
		}
		return hash, unreadable(line, i, derr), false, nil
	}
	// The stored bytes must be the record's canonical form; they are
	// compared by digest, so the form is hashed from a pooled buffer and
	// not kept.
	if c, cerr := canon.Digest(&r); cerr != nil || c != canon.DigestBytes(line) {
		return "", UnreadableRecord{}, false, &ChainError{Index: i, RecordID: r.RecordID, Reason: "stored bytes are not the record's canonical form"}
	}
	h, herr := hashOwned(&r)
	if herr != nil || h != r.RecordHash {
		return "", UnreadableRecord{}, false, &ChainError{Index: i, RecordID: r.RecordID, Reason: "record_hash does not match the record"}
	}
	if r.Replay != nil && r.Replay.RecordHash != r.RecordHash {
		return "", UnreadableRecord{}, false, &ChainError{Index: i, RecordID: r.RecordID, Reason: "replay.record_hash is not the record's record_hash"}
	}
	if r.PrevRecordHash != prev {
		return "", UnreadableRecord{}, false, &ChainError{Index: i, RecordID: r.RecordID, Reason: "prev_record_hash does not match the previous record"}
	}
	return r.RecordHash, UnreadableRecord{}, true, nil
}

// checkRawLink checks the link of a stored record that does not decode as
// a Record on its bytes: they are canonical JSON, record_hash is their
// digest without record_hash and replay.record_hash (what Hash computes
// for a record), replay.record_hash is record_hash, and prev_record_hash
// is prev.
func checkRawLink(line []byte, prev string, i int) (string, error) {
	k, err := readKeys(line)
	if err != nil {
		return "", &ChainError{Index: i, Reason: "record is not JSON"}
	}
	if c, err := canon.JSON(json.RawMessage(line)); err != nil || !bytes.Equal(c, line) {
		return "", &ChainError{Index: i, RecordID: k.RecordID, Reason: "stored bytes are not the record's canonical form"}
	}
	h, err := canon.DigestExcluding(json.RawMessage(line), []string{"record_hash"}, []string{"replay", "record_hash"})
	if err != nil || h != k.RecordHash {
		return "", &ChainError{Index: i, RecordID: k.RecordID, Reason: "record_hash does not match the record"}
	}
	if k.Replay != nil && k.Replay.RecordHash != k.RecordHash {
		return "", &ChainError{Index: i, RecordID: k.RecordID, Reason: "replay.record_hash is not the record's record_hash"}
	}
	if k.PrevRecordHash != prev {
		return "", &ChainError{Index: i, RecordID: k.RecordID, Reason: "prev_record_hash does not match the previous record"}
	}
	return k.RecordHash, nil
}
