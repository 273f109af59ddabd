package sensitive

import (
	"encoding/base64"
	"strings"
	"testing"
)

// encodedEdges are inputs at the edges of the encoded detector's fast
// paths (review of issue 37): padding inside and after a group, runs of
// every length around the small buffer (128 characters) and around a
// multiple of four, mixed alphabets, a bad character in each place of a
// group, fullwidth digits in UTF-16 and UTF-8 at every alignment, the
// digit-byte count at 12 and 13, two-byte characters at the end of the
// decoding, and blocks split by every kind and count of whitespace.
func encodedEdges() []string {
	var in []string
	add := func(s ...string) { in = append(in, s...) }
	std := base64.StdEncoding.EncodeToString
	url := base64.RawURLEncoding.EncodeToString
	card := "card " + visa + " ok"
	enc := std([]byte(card))
	// Padding: inside a group, doubled, tripled, after a short group.
	for i := 0; i <= len(enc); i++ {
		add(enc[:i]+"="+enc[i:], enc[:i]+"=="+enc[i:], enc[:i]+" ="+enc[i:])
	}
	add(enc+"===", enc+"= "+enc, strings.TrimRight(enc, "=")+"=", enc+"=x")
	// Run lengths around 4k+1 and the small buffer's 128 characters.
	for _, n := range []int{15, 16, 17, 18, 19, 20, 21, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 511, 512, 513, 683, 684, 685, 686} {
		for _, filler := range []string{"A", "x", "9"} {
			pre := strings.Repeat(filler, max(0, n-len(enc)))
			s := (pre + enc)
			if len(s) > n {
				s = s[len(s)-n:]
			}
			add(s, s+"=", s+"==", "x"+s, s+"x", s[:len(s)/2]+"\n"+s[len(s)/2:])
			// The card text placed so its decoding ends at the buffer's end.
			raw := strings.Repeat("z", max(0, 3*n/4-len(card))) + card
			add(std([]byte(raw)), url([]byte(raw)), std([]byte(raw))[1:], std([]byte(raw))+"Q")
		}
	}
	// Mixed alphabets and a bad character at each place of a group.
	mixed := strings.NewReplacer("+", "-", "/", "_").Replace(std([]byte("\xfb\xff\xbf" + card + "\xfb\xef")))
	add(mixed, std([]byte("\xfb\xff\xbf"+card+"\xfb\xef")))
	for i := 0; i < 24 && i < len(enc); i++ {
		for _, bad := range []string{".", "!", "\x00", "\xff", "é", "="} {
			add(enc[:i] + bad + enc[i+1:])
		}
	}
	// Fullwidth digits: UTF-16 LE and BE, UTF-8, at each alignment,
	// with 12 and 13 digits and their digit bytes (0xFF, 0xEF) alone.
	fw := "４１１１１１１１１１１１１１１１"
	u16 := utf16LE(fw)
	be := make([]byte, len(u16))
	for i := 0; i+1 < len(u16); i += 2 {
		be[i], be[i+1] = u16[i+1], u16[i]
	}
	for k := range 3 {
		pre := strings.Repeat("\x01", k)
		add(std([]byte(pre+string(u16))), std([]byte(pre+string(be))), std([]byte(pre+fw)), std([]byte(pre+fw[:36])), std([]byte(pre+fw[:39])))
		add(std([]byte(pre+"\xef\xbc"+string(u16[:24]))), std([]byte(pre+strings.Repeat("\xff", 13)+"\x14")), std([]byte(pre+strings.Repeat("\xef", 13))))
		add(std([]byte(pre+"411111111111"+"\xef\xbc\x91")), std([]byte(pre+"41111111111"+"\xff\x11\x11\xff")))
	}
	// Two-byte and longer characters at the end and cut at the end.
	for _, tail := range []string{"\xc2", "\xc2\xa0", "\xdf\xbf", "\xe2\x82", "\xe2\x82\xac", "\xf0\x9f\x98", "\xf0\x9f\x98\x80", "\xcd\xb8", "\xd5\x97", "\xc2\x80", "\xc2\xad"} {
		add(std([]byte("\x00"+card+tail)), std([]byte(card+"\x01"+tail)), std([]byte("text é "+card+tail)))
	}
	// Blocks: every whitespace, one to three of it, padding then space.
	lines := []string{}
	e := std([]byte(strings.Repeat(card+" ", 4)))
	for i := 0; i < len(e); i += 16 {
		lines = append(lines, e[i:min(i+16, len(e))])
	}
	for _, ws := range []string{" ", "  ", "   ", "\t", "\r", "\n", "\r\n", "\n\n", "\t ", " \n"} {
		add(strings.Join(lines, ws), "x"+strings.Join(lines, ws), strings.Join(lines, ws)+ws, strings.Join(lines[:2], "="+ws), lines[0]+"="+ws+lines[1])
		add(strings.Join(lines[:1], ws)+ws, lines[0][:12]+ws+lines[1], lines[0]+ws+lines[1][:3]+"="+ws+lines[2])
	}
	return in
}

func TestEncodedEdgesMatchReference(t *testing.T) {
	for _, s := range encodedEdges() {
		checkEncodedEquiv(t, s)
		checkEncodedEquiv(t, "data: "+s+" end")
	}
}
