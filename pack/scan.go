package pack

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/contextos/contextos/internal/sensitive"
)

// secretFinding is a secret or raw PII found in a document. What describes the
// kind of finding; it never contains the value.
type secretFinding struct {
	Path string
	Code string // CodeSecret or CodePII
	What string
}

// scanSecrets walks a value (a decoded JSON document of maps, slices and
// strings, or a Go value such as *Pack, whose members are named by their
// json tags) and reports, with its JSON path, every string that holds a
// secret or raw PII of the catalogue (internal/sensitive: card numbers
// however written, IBANs, emails, phone numbers, SSNs, PANs, API keys,
// credentials, private keys, key=value secrets, base64-wrapped secrets),
// every number that is a card number, every map key that is itself
// sensitive (its path shows Redacted in its place), and every
// secret-named member (db_password, api_key, access_token, ...) with a
// string value. Embedded raw JSON (expressions) is scanned too. Findings
// are sorted by path.
func scanSecrets(v any) []secretFinding {
	var out []secretFinding
	scanValue(reflect.ValueOf(v), "", "", &out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func scanValue(v reflect.Value, path, key string, out *[]secretFinding) {
	if !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scanValue(v.Elem(), path, key, out)
		}
	case reflect.String:
		scanString(v.String(), path, key, out)
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); f >= 1e12 && f < 1e19 && f == float64(int64(f)) {
			scanNumber(strconv.FormatInt(int64(f), 10), path, out)
		}
	case reflect.Int, reflect.Int64:
		scanNumber(strconv.FormatInt(v.Int(), 10), path, out)
	case reflect.Uint, reflect.Uint64:
		scanNumber(strconv.FormatUint(v.Uint(), 10), path, out)
	case reflect.Slice, reflect.Array:
		if v.Type() == rawMessageType {
			var doc any
			if json.Unmarshal(v.Bytes(), &doc) == nil {
				scanValue(reflect.ValueOf(doc), path, key, out)
			}
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			scanValue(v.Index(i), path+"["+strconv.Itoa(i)+"]", key, out)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key().String()
			p := joinPath(path, k)
			if f, ok := sensitive.Detect(k, sensitive.All); ok {
				// The key itself is sensitive: its path must not show it.
				p = joinPath(path, sensitive.Redacted)
				*out = append(*out, finding(p, f, "a member name"))
			}
			scanValue(iter.Value(), p, k, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			scanValue(v.Field(i), joinPath(path, name), name, out)
		}
	}
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func scanString(x, path, key string, out *[]secretFinding) {
	if x == "" {
		return
	}
	if sensitive.IsSecretKey(key) {
		*out = append(*out, secretFinding{Path: path, Code: CodeSecret, What: "member " + key + " holds a secret value; use a secret reference"})
		return
	}
	if f, ok := sensitive.Detect(x, sensitive.All); ok {
		*out = append(*out, finding(path, f, ""))
	}
}

// scanNumber reports a number (its decimal digits) that is a card number.
func scanNumber(digits, path string, out *[]secretFinding) {
	if sensitive.IsCardNumber(digits) {
		*out = append(*out, secretFinding{Path: path, Code: CodePII, What: "contains a payment card number; packs must not carry secrets or raw PII"})
	}
}

// finding describes a catalogue finding; it never holds the value.
func finding(path string, f sensitive.Finding, where string) secretFinding {
	code := CodePII
	if f.Kind.Secret() {
		code = CodeSecret
	}
	what := "contains " + f.What
	if where != "" {
		what = where + " " + what
	}
	return secretFinding{Path: path, Code: code, What: what + "; packs must not carry secrets or raw PII"}
}
