package sensitive_test

import (
	"testing"

	"github.com/contextos/contextos/internal/sensitive"
)

func TestDetectEscaped(t *testing.T) {
	key := "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{key, true},
		{"token%3D" + key, true},
		{"%73%6b%5f%6c%69%76%65%5f4eC39HqLyjWDarjtT1zdp7dc", true},     // "sk_live_" escaped
		{"%73%6b%5f%6c%69%76%65%5f4eC39HqLyjWDarjtT1zdp7dc%zz", false}, // does not decode
		{"100%25 honest", false},
		{"", false},
	} {
		if _, got := sensitive.DetectEscaped(tc.in, sensitive.Secrets); got != tc.want {
			t.Errorf("DetectEscaped(%.12q…) = %t, want %t", tc.in, got, tc.want)
		}
	}
}
