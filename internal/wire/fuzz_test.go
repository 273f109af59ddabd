package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{"a":1,"b":[true,false,null,"x"],"c":{"d":-1.5e3}}`,
	`{"a":1,"a":2}`,
	`{"a":1,"\u0061":2}`,
	`{"s":"\ud83d\ude00","t":"\ud800"}`,
	"{\"k\xff\":1}",
	"\xef\xbb\xbf{}",
	`[[[[[]]]]]`,
	`{"a":{"b":{"c":[{"d":1},{"d":2,"e":3}]}}}`,
	`"\u00e9\n\t\\\/"`,
	`{"x":1} `,
	`0`, `-0.0e-0`, `1.`, `01`, `{"a" 1}`, `[1,]`, `{,}`,
}

// surrogateEscape finds what may be a \u escape of a surrogate.
var surrogateEscape = regexp.MustCompile(`(?i)\\ud[89a-f]`)

// refDuplicates reports a duplicate member name the way encoding/json
// reads names (after unescaping), walking tokens.
func refDuplicates(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		obj     bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.obj {
					top.wantKey = true
				}
				stack = append(stack, &level{obj: v == '{', keys: map[string]bool{}, wantKey: true})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if top != nil && top.obj && top.wantKey {
				if top.keys[v] {
					return true
				}
				top.keys[v] = true
				top.wantKey = false
				continue
			}
		}
		if top != nil && top.obj {
			top.wantKey = true
		}
	}
}

func depth(data []byte) int {
	d, max := 0, 0
	in, esc := false, false
	for _, c := range data {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == '{' || c == '['):
			d++
			if d > max {
				max = d
			}
		case !in && (c == '}' || c == ']'):
			d--
		}
	}
	return max
}

// FuzzCheckStrict is differential against encoding/json: a document
// CheckStrict accepts is valid JSON and valid UTF-8 and decodes through
// Decode exactly as encoding/json decodes it; a valid, duplicate-free,
// UTF-8 document without surrogate escapes and within MaxDepth is
// accepted. The scan never panics and reports a bounded number of
// problems.
func FuzzCheckStrict(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		probs := CheckStrict(data)
		if len(probs) > maxProblems+1 {
			t.Fatalf("%d problems", len(probs))
		}
		for _, p := range probs {
			if !utf8.ValidString(p.Path) || !utf8.ValidString(p.Message) {
				t.Fatalf("problem text is not UTF-8: %q", p)
			}
		}
		valid := json.Valid(data)
		if len(probs) == 0 {
			if !valid || !utf8.Valid(data) {
				t.Fatalf("accepted %q, which encoding/json refuses or is not UTF-8", data)
			}
			if refDuplicates(data) {
				t.Fatalf("accepted %q, which has a duplicate member", data)
			}
			var want, got any
			if err := json.Unmarshal(data, &want); err != nil {
				// Well-formed but not decodable (a number beyond float64).
				if ps, _ := Decode(data, &got); len(ps) == 0 {
					t.Fatalf("Decode accepted what encoding/json cannot decode: %v", err)
				}
				return
			}
			if ps, _ := Decode(data, &got); len(ps) > 0 {
				t.Fatalf("Decode refused a strict document: %v", ps)
			}
			// Decode keeps numbers as json.Number only while checking.
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("Decode = %#v, encoding/json = %#v", got, want)
			}
			return
		}
		if valid && utf8.Valid(data) && !refDuplicates(data) && !surrogateEscape.Match(data) &&
			depth(data) <= MaxDepth && !bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
			t.Fatalf("refused %q: %v", data, probs)
		}
		if !valid {
			// Malformed JSON must be refused as such (or earlier).
			return
		}
	})
}

// FuzzDecodeMap: Decode into a map either refuses the document or agrees
// with encoding/json, and never panics.
func FuzzDecodeMap(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got map[string]any
		probs, _ := Decode(data, &got)
		if len(probs) > 0 {
			return
		}
		var want map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&want); err != nil {
			t.Fatalf("Decode accepted what encoding/json refuses: %v", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatal("Decode accepted trailing data")
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("Decode = %v, encoding/json = %v", got, want)
		}
		if refDuplicates(data) || !utf8.Valid(data) || strings.Contains(string(data), "\ufffd") && !utf8.Valid(data) {
			t.Fatalf("Decode accepted a duplicate member or invalid UTF-8: %q", data)
		}
	})
}
