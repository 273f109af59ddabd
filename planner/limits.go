package planner

import "errors"

// DefaultMaxResponseBytes is the default bound of a provider's response
// body a model planner reads (the MaxResponseBytes option of
// planner/openai and planner/anthropic): an answer or a stream longer
// than it fails with ErrResponseTooLarge.
const DefaultMaxResponseBytes = 8 << 20

// ErrResponseTooLarge is the error (wrapped) of a model planner whose
// provider sent a response body longer than its MaxResponseBytes: the
// planner stops reading it and the turn fails.
var ErrResponseTooLarge = errors.New("planner: the provider's response is too large")
