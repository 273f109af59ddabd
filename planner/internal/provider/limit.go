package provider

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/contextos/contextos/planner"
)

// MaxResponseBytes is an option's response bound: 0 is
// planner.DefaultMaxResponseBytes, a negative bound is an error.
func MaxResponseBytes(n int64) (int64, error) {
	switch {
	case n < 0:
		return 0, errors.New("MaxResponseBytes must not be negative")
	case n == 0:
		return planner.DefaultMaxResponseBytes, nil
	}
	return n, nil
}

// LimitBody is an SDK middleware (the signature both SDKs' option.WithMiddleware
// take) that bounds each response body to max bytes: a read past them
// fails with an error matching planner.ErrResponseTooLarge, so the SDK
// stops reading (a body it buffers, or a stream it decodes) and closes
// the connection.
func LimitBody(max int64) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		resp, err := next(req)
		if err != nil || resp == nil || resp.Body == nil {
			return resp, err
		}
		resp.Body = &limitedBody{body: resp.Body, left: max, max: max}
		return resp, nil
	}
}

// limitedBody is a response body of at most max bytes.
type limitedBody struct {
	body      io.ReadCloser
	left, max int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooLarge()
	}
	// One byte past the bound tells a body of exactly max bytes from a
	// longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.body.Read(p)
	if int64(n) > b.left {
		n, b.left = int(b.left), -1
		return n, b.tooLarge()
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) tooLarge() error {
	return fmt.Errorf("%w: the response is longer than %d bytes (MaxResponseBytes)", planner.ErrResponseTooLarge, b.max)
}

func (b *limitedBody) Close() error { return b.body.Close() }
