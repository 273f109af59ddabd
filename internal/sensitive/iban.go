package sensitive

// IBANs (ISO 13616): a country code with a known IBAN length, two check
// digits and the account number, written together or in groups joined by
// single spaces, and passing the mod-97 check. The letters may be upper or
// lower case.

// ibanLengths are the IBAN lengths by country (the SWIFT IBAN registry).
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27,
	"BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28,
	"EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23,
	"GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
	"LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28,
	"NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22,
	"RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// ibanLen is ibanLengths indexed by the two upper-case letters.
var ibanLen [26 * 26]uint8

func init() {
	for cc, n := range ibanLengths {
		ibanLen[int(cc[0]-'A')*26+int(cc[1]-'A')] = uint8(n)
	}
}

func findIBANs(s string, st *stats, spans []span, first bool) []span {
	if st.letters < 2 || st.digits < 8 {
		return spans
	}
	for i := 0; i+15 <= len(s); i++ {
		a, b := s[i], s[i+1]
		if !isLetter(a) || !isLetter(b) || isUpper(a) != isUpper(b) || !isDigit(s[i+2]) || !isDigit(s[i+3]) || i > 0 && isAlnum(s[i-1]) {
			continue
		}
		n := int(ibanLen[int(lower(a)-'a')*26+int(lower(b)-'a')])
		if n == 0 {
			continue
		}
		if end, ok := ibanAt(s, i, n); ok {
			spans = append(spans, span{i, end, IBAN, kindInfo[IBAN].what})
			if first {
				return spans
			}
			i = end - 1
		}
	}
	return spans
}

// ibanAt reads an IBAN of n characters at s[i] and reports where it ends
// and whether its check digits are right.
func ibanAt(s string, i, n int) (int, bool) {
	var chars [34]byte
	k, j := 0, i
	for k < n && j < len(s) {
		c := s[j]
		if c == ' ' && k > 0 && j+1 < len(s) && isAlnum(s[j+1]) && s[j-1] != ' ' {
			j++
			continue
		}
		if !isAlnum(c) {
			return 0, false
		}
		chars[k] = c
		k++
		j++
	}
	if k < n || j < len(s) && isAlnum(s[j]) {
		return 0, false
	}
	return j, mod97(chars[4:n], chars[:4]) == 1
}

// mod97 is the remainder by 97 of the number a then b spell, letters
// counting 10 to 35.
func mod97(a, b []byte) int {
	r := 0
	for _, part := range [2][]byte{a, b} {
		for _, c := range part {
			switch {
			case isDigit(c):
				r = (r*10 + int(c-'0')) % 97
			case isLetter(c):
				r = (r*100 + int(lower(c)-'a') + 10) % 97
			default:
				return -1
			}
		}
	}
	return r
}
