package gateway

import (
	"reflect"
	"testing"
)

// A call's record is one allocation the collector sees on every call: it
// stays within the 3,072-byte size class (the allocator adds an 8-byte
// header to objects over 512 bytes that hold pointers), and a paused
// result's approval copy, the argument encoding and the capability's
// metadata encoding are kept out of it (see ownResult, argsBufs,
// metaJSON). A field that takes it over moves every call to the
// 3,200-byte class.
func TestCallRecordSizeClass(t *testing.T) {
	t.Parallel()
	if n := reflect.TypeFor[callRecord]().Size() + 8; n > 3072 {
		t.Errorf("a call's record allocates %d bytes with its header, over the 3,072-byte size class", n)
	}
}
