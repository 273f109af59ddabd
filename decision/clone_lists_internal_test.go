package decision

import (
	"reflect"
	"testing"

	"github.com/contextos/contextos/internal/deepcheck"
	"github.com/contextos/contextos/runcontext"
)

// TestCopyRecordListsAreTheirOwn holds the typed copy's string lists,
// cut from one array, to lists of their own: appending to any of them
// (as a caller given the stored copy may) changes no other, and each is
// capped at its length.
func TestCopyRecordListsAreTheirOwn(t *testing.T) {
	r := &Record{}
	deepcheck.Fill(reflect.ValueOf(r).Elem())
	r.Status = Decided
	for i := range r.AgentIdentity.PrincipalChain {
		r.AgentIdentity.PrincipalChain[i].Kind = runcontext.PrincipalUser
	}
	for i := range r.Approvals {
		r.Approvals[i].ApprovalModeEffective = runcontext.Destructive
	}
	r.ControlsActive.MustEscalate = []string{} // an empty list among full ones
	c, ok := copyRecord(r)
	if !ok {
		t.Fatal("a record of plain values does not take the typed copy")
	}
	want, err := cloneRecordJSON(c)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i))
			}
		case reflect.Slice:
			if s, ok := v.Interface().([]string); ok {
				if cap(s) != len(s) {
					t.Errorf("a list of %d strings has room for %d", len(s), cap(s))
				}
				_ = append(s, "appended")
				n++
				return
			}
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(c))
	if n < 8 {
		t.Fatalf("walked %d string lists, want the record's eight or more", n)
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("appends to the copy's lists changed others:\n%#v\nwant\n%#v", c, want)
	}
	if c.ControlsActive.MustEscalate == nil || len(c.ControlsActive.MustEscalate) != 0 {
		t.Fatalf("empty list copied as %#v, want an empty list", c.ControlsActive.MustEscalate)
	}
}
