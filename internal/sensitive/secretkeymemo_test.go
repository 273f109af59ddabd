package sensitive

import (
	"strconv"
	"testing"
)

// TestIsSecretKeyMemo holds IsSecretKey, which keeps its answers, to
// isSecretKey's on the first and on later readings of each name, and
// the memo to its bound (names past it are still answered, not kept).
func TestIsSecretKeyMemo(t *testing.T) {
	names := []string{"password", "db_password", "api_key", "token_ref", "page_token", "order_id", "secretary",
		"nextPageToken", "x-api-key", "clientSecret", "max_tokens", "ab", "abc", "Authorization"}
	for range 3 {
		for _, k := range names {
			if got, want := IsSecretKey(k), len(k) >= 3 && isSecretKey(k); got != want {
				t.Fatalf("IsSecretKey(%q) = %v, isSecretKey says %v", k, got, want)
			}
		}
	}
	for i := range secretKeyMemoMax + 100 {
		k := "memo_" + strconv.Itoa(i)
		if i%2 == 0 {
			k += "_secret"
		}
		for range 2 {
			if got, want := IsSecretKey(k), i%2 == 0; got != want {
				t.Fatalf("IsSecretKey(%q) = %v, want %v", k, got, want)
			}
		}
	}
	secretKeyMemo.RLock()
	n := len(secretKeyMemo.m)
	secretKeyMemo.RUnlock()
	if n != secretKeyMemoMax {
		t.Fatalf("the memo holds %d names, its bound is %d", n, secretKeyMemoMax)
	}
	if !secretKeyMemo.full.Load() {
		t.Fatal("the memo is at its bound but not marked full: names past it still take its lock")
	}
	for _, k := range names {
		if got, want := IsSecretKey(k), len(k) >= 3 && isSecretKey(k); got != want {
			t.Fatalf("IsSecretKey(%q) = %v past the bound, isSecretKey says %v", k, got, want)
		}
	}
}
