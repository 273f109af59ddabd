package agent

import (
	"encoding/json"
	"strconv"
)

// ExitStatus is how the backend process ended.
type ExitStatus struct {
	// Code is the exit code, or -1 when the process died by a signal or
	// its status is unknown.
	Code int `json:"code"`
	// Signal names the signal that ended the process ("killed",
	// "interrupt", …), "" when it exited.
	Signal string `json:"signal,omitempty"`
}

// Success reports whether the process exited with code 0.
func (s ExitStatus) Success() bool { return s.Code == 0 && s.Signal == "" }

// String is "exit status N" or "signal: NAME".
func (s ExitStatus) String() string {
	if s.Signal != "" {
		return "signal: " + s.Signal
	}
	return "exit status " + strconv.Itoa(s.Code)
}

// Completion is a finished run: the process's exit status, the final
// assistant text when the backend can extract it deterministically, and
// bounded backend data (the session facet, usage, cost). A non-zero exit
// is a Completion with a non-success Status, not an error.
type Completion struct {
	Status ExitStatus `json:"status"`
	// FinalText is at most MaxFinalTextBytes ("" when none).
	FinalText string `json:"final_text,omitempty"`
	// Data is compact JSON of at most MaxDataBytes (else the oversize
	// marker).
	Data json.RawMessage `json:"data,omitempty"`
}

// bounded returns c with its final text and data bounded.
func (c Completion) bounded() Completion {
	c.FinalText = truncate(toValidUTF8(c.FinalText), MaxFinalTextBytes)
	c.Data = boundData(c.Data)
	return c
}
