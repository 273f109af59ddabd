package transport_test

import (
	"strings"
	"testing"

	"github.com/contextos/contextos/transport"
)

// A tool's error body echoing card numbers, an IBAN, an email address and
// credentials reaches the error message with none of them; the message
// still says what happened.
func TestHTTPStatusErrorScrubsPII(t *testing.T) {
	body := `{"error":"declined","card":"4111 1111 1111 1111","pan":5555555555554444,"iban":"DE89 3704 0044 0532 0130 00",` +
		`"email":"bob@example.com","echo":"Authorization: Bearer abcdef123456","dsn":"postgres://app:hunter2@db/app"}`
	te := transport.HTTPStatusError(402, []byte(body), nil)
	for _, leak := range []string{"4111 1111 1111 1111", "5555555555554444", "DE89 3704", "bob@example.com", "abcdef123456", "hunter2"} {
		if strings.Contains(te.Message, leak) {
			t.Errorf("message holds %q: %s", leak, te.Message)
		}
	}
	if !strings.Contains(te.Message, "HTTP 402") || !strings.Contains(te.Message, "declined") {
		t.Errorf("message lost its sense: %s", te.Message)
	}
	if once := transport.Redact(body); transport.Redact(once) != once {
		t.Errorf("Redact is not idempotent: %s", once)
	}
}
