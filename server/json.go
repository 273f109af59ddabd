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

// writeView answers a run view as writeJSON would, without decoding and
// encoding again the record, results and events it holds, which the
// handler encoded (and redacted) itself.
func writeView(w http.ResponseWriter, status int, v *runView) {
	b, err := v.appendJSON(make([]byte, 0, 16<<10))
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

// appendJSON appends v's JSON form, as json.Marshal writes it.
func (v *runView) appendJSON(dst []byte) ([]byte, error) {
	str := func(dst []byte, name, s string) ([]byte, error) {
		b, err := json.Marshal(s)
		dst = append(append(dst, name...), b...)
		return dst, err
	}
	raws := func(dst []byte, name string, l []json.RawMessage) []byte {
		dst = append(dst, name...)
		if l == nil {
			return append(dst, "null"...)
		}
		dst = append(dst, '[')
		for i, r := range l {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendRaw(dst, r)
		}
		return append(dst, ']')
	}
	var err error
	if dst, err = str(dst, `{"run_id":`, v.RunID); err != nil {
		return nil, err
	}
	if dst, err = str(dst, `,"tenant_id":`, v.TenantID); err != nil {
		return nil, err
	}
	if dst, err = str(dst, `,"state":`, v.State); err != nil {
		return nil, err
	}
	if v.Status != "" {
		if dst, err = str(dst, `,"status":`, string(v.Status)); err != nil {
			return nil, err
		}
	}
	dst = appendRaw(append(dst, `,"decision_record":`...), v.Record)
	dst = raws(dst, `,"tool_results":`, v.ToolResults)
	dst = raws(dst, `,"events":`, v.Events)
	pa, err := json.Marshal(v.PendingApprovals)
	if err != nil {
		return nil, err
	}
	dst = append(append(dst, `,"pending_approvals":`...), pa...)
	return append(dst, '}'), nil
}

// appendRaw appends a JSON value the handler encoded ("null" for none).
func appendRaw(dst []byte, r json.RawMessage) []byte {
	if len(r) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, r...)
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
