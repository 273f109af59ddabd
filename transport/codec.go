package transport

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/contextos/contextos/internal/wire"
)

// rawInput is the http transport's body: input_raw when set, else the
// input object.
func rawInput(req *Request) ([]byte, error) {
	if req.InputRaw != "" {
		return []byte(req.InputRaw), nil
	}
	return json.Marshal(req.Input)
}

// decodeObject decodes a JSON object (and nothing after it).
func decodeObject(b []byte, v *map[string]any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not a JSON object")
	}
	if err := wire.Strict(b); err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data")
	}
	return nil
}
