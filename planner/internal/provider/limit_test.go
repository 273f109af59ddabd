package provider

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/contextos/contextos/planner"
)

// A body of up to the bound reads whole; one byte more fails with
// ErrResponseTooLarge after the bound's bytes, and keeps failing; the
// body is closed through the wrapper.
func TestLimitBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		size    int
		max     int64
		oneByte bool // the body returns one byte per Read
		tooBig  bool
	}{
		{"empty", 0, 8, false, false},
		{"under", 7, 8, false, false},
		{"exact", 8, 8, false, false},
		{"exact, byte by byte", 8, 8, true, false},
		{"one over", 9, 8, false, true},
		{"one over, byte by byte", 9, 8, true, true},
		{"far over", 1 << 20, 1024, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r io.Reader = bytes.NewReader(bytes.Repeat([]byte("x"), tc.size))
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			closed := false
			body := closer{Reader: r, close: func() { closed = true }}
			resp, err := LimitBody(tc.max)(&http.Request{}, func(*http.Request) (*http.Response, error) { return &http.Response{Body: body}, nil })
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if tc.tooBig != errors.Is(err, planner.ErrResponseTooLarge) || !tc.tooBig && err != nil {
				t.Fatalf("read %d bytes, error %v; want too large: %v", len(got), err, tc.tooBig)
			}
			if tc.tooBig {
				if int64(len(got)) != tc.max || !strings.Contains(err.Error(), "longer than") {
					t.Errorf("read %d bytes before %v, want %d", len(got), err, tc.max)
				}
				if _, err := resp.Body.Read(make([]byte, 4)); !errors.Is(err, planner.ErrResponseTooLarge) {
					t.Errorf("a read after the bound: %v", err)
				}
			} else if len(got) != tc.size {
				t.Errorf("read %d bytes of %d", len(got), tc.size)
			}
			_ = resp.Body.Close()
			if !closed {
				t.Error("the body was not closed")
			}
		})
	}
	// No response, or an error, passes through.
	if resp, err := LimitBody(8)(&http.Request{}, func(*http.Request) (*http.Response, error) { return nil, io.ErrUnexpectedEOF }); resp != nil || err != io.ErrUnexpectedEOF {
		t.Errorf("a failed request = %v, %v", resp, err)
	}
}

func TestMaxResponseBytes(t *testing.T) {
	for _, tc := range []struct {
		in, want int64
		err      bool
	}{{0, planner.DefaultMaxResponseBytes, false}, {1, 1, false}, {-1, 0, true}} {
		if got, err := MaxResponseBytes(tc.in); got != tc.want || (err != nil) != tc.err {
			t.Errorf("MaxResponseBytes(%d) = %d, %v", tc.in, got, err)
		}
	}
}

type closer struct {
	io.Reader
	close func()
}

func (c closer) Close() error { c.close(); return nil }
