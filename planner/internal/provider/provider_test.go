package errtext

import "testing"

func TestWord(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		lower bool
		want  string
	}{
		{"rate_limit_error", 40, true, "rate_limit_error"},
		{"invalid_request_error", 40, true, "invalid_request_error"},
		{"sk-proj-abc123", 40, true, ""},
		{"sk-ant-api03-SECRET", 64, false, ""},
		{"Invalid_Key", 40, true, ""},
		{"req_011CSHoEeqs5C35K2UUqR7Fy", 64, false, "req_011CSHoEeqs5C35K2UUqR7Fy"},
		{"has space", 40, true, ""},
		{"", 40, true, ""},
		{"a\x00b", 40, true, ""},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 40, true, ""},
		{"é", 40, false, ""},
	}
	for _, tc := range tests {
		if got := Word(tc.in, tc.limit, tc.lower); got != tc.want {
			t.Errorf("Word(%q, %d, %v) = %q, want %q", tc.in, tc.limit, tc.lower, got, tc.want)
		}
	}
}
