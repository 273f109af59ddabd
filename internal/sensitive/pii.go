package sensitive

import (
	"regexp"
	"strings"
)

var emailRE = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b`)

func findEmails(s string, st *stats, spans []span, first bool) []span {
	if !st.at {
		return spans
	}
	for _, m := range emailRE.FindAllStringIndex(s, -1) {
		if inURLUserinfo(s, m[0]) {
			continue
		}
		spans = append(spans, span{m[0], m[1], Email, kindInfo[Email].what})
		if first {
			return spans
		}
	}
	return spans
}

// inURLUserinfo reports whether the match at i is the "user@host" or
// "password@host" of a URL's user info (a user name or a URL
// credential, not an address).
func inURLUserinfo(s string, i int) bool {
	if i >= 3 && s[i-3:i] == "://" {
		return true // a URL's user name
	}
	if i == 0 || s[i-1] != ':' {
		return false
	}
	l := i - 1
	for l > 0 && strings.IndexByte(" \t\r\n\"'<>", s[l-1]) < 0 {
		l--
	}
	return strings.Contains(s[l:i], "://")
}

// Phone numbers (E.164): "+", a non-zero digit, then 8 to 15 digits in
// all, in groups joined by up to two of space, dash, dot and parentheses
// ("+1 (415) 555-0100"). The "+" must not follow a letter or digit (so
// "1e+10" and "5+12345678" are not numbers).
func findPhones(s string, st *stats, spans []span, first bool) []span {
	if !st.plus || st.digits < 8 {
		return spans
	}
	for from := 0; ; {
		k := strings.IndexByte(s[from:], '+')
		if k < 0 {
			return spans
		}
		i := from + k
		from = i + 1
		if i > 0 && (isAlnum(s[i-1]) || s[i-1] == '+') || i+1 >= len(s) || s[i+1] < '1' || s[i+1] > '9' {
			continue
		}
		n, end, j := 0, i+1, i+1
		for j < len(s) {
			g := j
			for g < len(s) && isDigit(s[g]) {
				g++
			}
			if n+g-j > 15 {
				break
			}
			n += g - j
			end = g
			// Up to two separators before the next group.
			sep := g
			for sep < len(s) && sep-g < 2 && strings.IndexByte(" -.()", s[sep]) >= 0 {
				sep++
			}
			if sep == g || sep >= len(s) || !isDigit(s[sep]) {
				break
			}
			j = sep
		}
		if n >= 8 {
			// A closing parenthesis right after the number stays.
			spans = append(spans, span{i, end, Phone, kindInfo[Phone].what})
			if first {
				return spans
			}
			from = end
		}
	}
}

// US social security numbers: "AAA-GG-SSSS" with a valid area (not 000,
// 666 or 9xx), group (not 00) and serial (not 0000), not part of a longer
// run of digits and dashes.
func findSSNs(s string, st *stats, spans []span, first bool) []span {
	if !st.dash || st.digits < 9 {
		return spans
	}
	for i := 0; i+11 <= len(s); i++ {
		if s[i+3] != '-' || s[i+6] != '-' || !allDigits(s[i:i+3]) || !allDigits(s[i+4:i+6]) || !allDigits(s[i+7:i+11]) {
			continue
		}
		if i > 0 && (isDigit(s[i-1]) || s[i-1] == '-' && i > 1 && isDigit(s[i-2])) {
			continue
		}
		if e := i + 11; e < len(s) && (isDigit(s[e]) || s[e] == '-' && e+1 < len(s) && isDigit(s[e+1])) {
			continue
		}
		area, group, serial := s[i:i+3], s[i+4:i+6], s[i+7:i+11]
		if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
			continue
		}
		spans = append(spans, span{i, i + 11, SSN, kindInfo[SSN].what})
		if first {
			return spans
		}
		i += 10
	}
	return spans
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// Indian PANs: five letters (the fourth the holder type), four digits and
// a letter, standing alone.
func findPANs(s string, st *stats, spans []span, first bool) []span {
	if st.upper < 6 || st.digits < 4 {
		return spans
	}
	for i := 0; i+10 <= len(s); i++ {
		if i > 0 && isAlnum(s[i-1]) || i+10 < len(s) && isAlnum(s[i+10]) {
			continue
		}
		p := s[i : i+10]
		ok := isUpper(p[0]) && isUpper(p[1]) && isUpper(p[2]) && strings.IndexByte("ABCFGHJLPT", p[3]) >= 0 && isUpper(p[4]) &&
			allDigits(p[5:9]) && isUpper(p[9])
		if !ok {
			continue
		}
		spans = append(spans, span{i, i + 10, PAN, kindInfo[PAN].what})
		if first {
			return spans
		}
		i += 9
	}
	return spans
}

// Aadhaar numbers: twelve digits "dddd dddd dddd" (spaces or dashes), the
// first 2 to 9, passing the Verhoeff check.
func findAadhaar(s string, st *stats, spans []span, first bool) []span {
	if st.digits < 12 {
		return spans
	}
	for i := 0; i+14 <= len(s); i++ {
		p := s[i : i+14]
		sep := p[4]
		if (sep != ' ' && sep != '-') || p[9] != sep || p[0] < '2' || p[0] > '9' || !allDigits(p[:4]) || !allDigits(p[5:9]) || !allDigits(p[10:]) {
			continue
		}
		if i > 0 && isAlnum(s[i-1]) || i+14 < len(s) && isAlnum(s[i+14]) {
			continue
		}
		if !verhoeff(p) {
			continue
		}
		spans = append(spans, span{i, i + 14, Aadhaar, kindInfo[Aadhaar].what})
		if first {
			return spans
		}
		i += 13
	}
	return spans
}

var (
	verhoeffD = [10][10]byte{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 0, 6, 7, 8, 9, 5}, {2, 3, 4, 0, 1, 7, 8, 9, 5, 6},
		{3, 4, 0, 1, 2, 8, 9, 5, 6, 7}, {4, 0, 1, 2, 3, 9, 5, 6, 7, 8}, {5, 9, 8, 7, 6, 0, 4, 3, 2, 1},
		{6, 5, 9, 8, 7, 1, 0, 4, 3, 2}, {7, 6, 5, 9, 8, 2, 1, 0, 4, 3}, {8, 7, 6, 5, 9, 3, 2, 1, 0, 4},
		{9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
	}
	verhoeffP = [8][10]byte{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 5, 7, 6, 2, 8, 3, 0, 9, 4}, {5, 8, 0, 3, 7, 9, 6, 1, 4, 2},
		{8, 9, 1, 6, 0, 4, 3, 5, 2, 7}, {9, 4, 5, 3, 1, 2, 6, 8, 7, 0}, {4, 2, 8, 6, 5, 7, 3, 9, 0, 1},
		{2, 7, 9, 3, 8, 0, 6, 4, 1, 5}, {7, 0, 4, 6, 9, 1, 3, 2, 5, 8},
	}
)

// verhoeff checks the digits of s (other bytes skipped).
func verhoeff(s string) bool {
	c, pos := byte(0), 0
	for i := len(s) - 1; i >= 0; i-- {
		if !isDigit(s[i]) {
			continue
		}
		c = verhoeffD[c][verhoeffP[pos%8][s[i]-'0']]
		pos++
	}
	return c == 0
}
