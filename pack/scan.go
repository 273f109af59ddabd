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
	var w scanWalk
	w.value(reflect.ValueOf(v), "")
	out := w.out
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// scanWalk is one scan: its findings and the JSON path of the value it is
// at, kept as a stack of segments and written out only when a finding
// names it, so a walk over a large pack makes no string per value.
type scanWalk struct {
	out  []secretFinding
	segs []pathSeg
}

// pathSeg is a member name or, when isIndex, an array index.
type pathSeg struct {
	name    string
	index   int
	isIndex bool
}

func (w *scanWalk) push(s pathSeg) { w.segs = append(w.segs, s) }
func (w *scanWalk) pop()           { w.segs = w.segs[:len(w.segs)-1] }

// path is the current path as joinPath and "[i]" write it.
func (w *scanWalk) path() string {
	p := ""
	for _, s := range w.segs {
		if s.isIndex {
			p += "[" + strconv.Itoa(s.index) + "]"
		} else {
			p = joinPath(p, s.name)
		}
	}
	return p
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

func (w *scanWalk) value(v reflect.Value, key string) {
	if !v.IsValid() {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			w.value(v.Elem(), key)
		}
	case reflect.String:
		w.str(v.String(), key)
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); f >= 1e12 && f < 1e19 && f == float64(int64(f)) {
			w.number(strconv.FormatInt(int64(f), 10))
		}
	case reflect.Int, reflect.Int64:
		w.number(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint64:
		w.number(strconv.FormatUint(v.Uint(), 10))
	case reflect.Slice, reflect.Array:
		if v.Type() == rawMessageType {
			var doc any
			if json.Unmarshal(v.Bytes(), &doc) == nil {
				w.value(reflect.ValueOf(doc), key)
			}
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			w.push(pathSeg{index: i, isIndex: true})
			w.value(v.Index(i), key)
			w.pop()
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key().String()
			seg := pathSeg{name: k}
			if f, ok := sensitive.Detect(k, sensitive.All); ok {
				// The key itself is sensitive: its path must not show it.
				seg.name = sensitive.Redacted
				w.push(seg)
				w.out = append(w.out, finding(w.path(), f, "a member name"))
				w.pop()
			}
			w.push(seg)
			w.value(iter.Value(), k)
			w.pop()
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
			w.push(pathSeg{name: name})
			w.value(v.Field(i), name)
			w.pop()
		}
	}
}

func joinPath(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func (w *scanWalk) str(x, key string) {
	if x == "" {
		return
	}
	if sensitive.IsSecretKey(key) {
		w.out = append(w.out, secretFinding{Path: w.path(), Code: CodeSecret, What: "member " + key + " holds a secret value; use a secret reference"})
		return
	}
	if f, ok := sensitive.Detect(x, sensitive.All); ok {
		w.out = append(w.out, finding(w.path(), f, ""))
	}
}

// number reports a number (its decimal digits) that is a card number.
func (w *scanWalk) number(digits string) {
	if sensitive.IsCardNumber(digits) {
		w.out = append(w.out, secretFinding{Path: w.path(), Code: CodePII, What: "contains a payment card number; packs must not carry secrets or raw PII"})
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
