package provider

import (
	"errors"
	"math"
	"testing"

	"github.com/contextos/contextos/planner"
)

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

func TestBaseURL(t *testing.T) {
	for s, ok := range map[string]bool{"": true, "http://127.0.0.1:11434/v1": true, "https://api.example/v1/": true,
		"127.0.0.1:8080": false, "ftp://x": false, "https://": false, "::": false} {
		if err := BaseURL(s); (err == nil) != ok {
			t.Errorf("BaseURL(%q) = %v", s, err)
		}
	}
}

func TestPrices(t *testing.T) {
	if m, err := Prices(map[string]planner.Price{"a": {InputUSDPerMTok: 3}}); m != "" || err != nil {
		t.Error(m, err)
	}
	bad := map[string]planner.Price{"b": {InputUSDPerMTok: -1}, "a": {OutputUSDPerMTok: math.NaN()}, "c": {InputUSDPerMTok: 3}}
	if m, err := Prices(bad); m != "a" || !errors.Is(err, planner.ErrInvalidPrice) {
		t.Errorf("Prices = %q, %v; want the first bad model in sorted order", m, err)
	}
}
