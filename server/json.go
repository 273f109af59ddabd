package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/contextos/contextos/internal/wire"
)

// writeJSON answers v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, errorf(http.StatusInternalServerError, CodeInternal, "the answer could not be encoded"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// readBody reads a JSON request body of at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "the body must be application/json")
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errorf(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the body is larger than %d bytes", limit)
		}
		return nil, errorf(http.StatusBadRequest, CodeInvalidRequest, "the body could not be read")
	}
	return b, nil
}

// decodeStrict decodes a JSON object into dst: duplicate members, invalid
// UTF-8, unknown members and trailing data are refused, naming the
// member.
func decodeStrict(b []byte, dst any) *apiError {
	if len(bytes.TrimSpace(b)) == 0 {
		return invalid(FieldError{Code: "required", Message: "the body is empty; a JSON object is required"})
	}
	if err := wire.Strict(b); err != nil {
		return invalid(FieldError{Code: "decode", Message: clipMsg(err.Error())})
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return invalid(decodeField(err))
	}
	if dec.More() {
		return invalid(FieldError{Code: "decode", Message: "data after the JSON object"})
	}
	return nil
}

// decodeField names the member a json decode error is about.
func decodeField(err error) FieldError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		path := te.Field
		if path == "" {
			return FieldError{Code: "type", Message: fmt.Sprintf("the body must be a JSON object, not %s", te.Value)}
		}
		return FieldError{Path: path, Code: "type", Message: fmt.Sprintf("must be %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)}
	case errors.As(err, &se):
		return FieldError{Code: "decode", Message: fmt.Sprintf("invalid JSON at byte %d", se.Offset)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return FieldError{Path: clip(name), Code: "unknown_field", Message: "is not a member of this request"}
	}
	return FieldError{Code: "decode", Message: "the body is not a valid JSON object"}
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "map", "struct":
		return "an object"
	case "slice":
		return "an array"
	case "bool":
		return "a boolean"
	}
	return "a number"
}
