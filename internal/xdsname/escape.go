package xdsname

import "strings"

// Byte classes for escaping. A byte marked safe is written as is; any other
// byte is written as %XX (upper-case hex).
//
// hostSafe and pathSafe are net/url's rules for URL.Host and URL.Path, which
// is how grpc-go's xDS client builds its canonical names; the tests check
// every byte against net/url. The query rules leave as is every byte that
// grpc-go writes raw and that still reads back the same (grpc-go joins the
// decoded keys and values without escaping), and escape the bytes that would
// not: '%', '&', '+', '#', ';', control characters, and '=' in a key.
var (
	hostSafe       = safeSet(alnum + "-._~" + "!\"$&'()*+,:;<=>[]")
	pathSafe       = safeSet(alnum + "-._~" + "$&+,/:;=@")
	queryValueSafe = complementSet("%&+#;")
	queryKeySafe   = complementSet("%&+#;=")
	// altSafe is for an alt URL inside the fragment: it is already
	// canonical, so only the directive separator needs escaping.
	altSafe = complementSet(",")
	// entrySafe is the entry directive's character set.
	entrySafe = safeSet(alnum + "_-./~:")
)

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

const upperHex = "0123456789ABCDEF"

// safeSet marks exactly the bytes of chars as safe.
func safeSet(chars string) *[256]bool {
	var t [256]bool
	for i := 0; i < len(chars); i++ {
		t[chars[i]] = true
	}
	return &t
}

// complementSet marks as safe every byte except control characters and the
// bytes of chars.
func complementSet(chars string) *[256]bool {
	var t [256]bool
	for c := range t {
		t[c] = !isControl(byte(c))
	}
	for i := 0; i < len(chars); i++ {
		t[chars[i]] = false
	}
	return &t
}

// isControl reports whether c is an ASCII control character.
func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// appendEscaped appends s to buf, percent-encoding every byte not in safe.
func appendEscaped(buf []byte, s string, safe *[256]bool) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safe[c] {
			buf = append(buf, c)
			continue
		}
		buf = append(buf, '%', upperHex[c>>4], upperHex[c&15])
	}
	return buf
}

// unhex returns the value of the hex digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// badEscapeAt returns the escape starting at s[i] ('%') if it is malformed
// (for the error message), or "" if it is two hex digits.
func badEscapeAt(s string, i int) string {
	if i+2 < len(s) && unhex(s[i+1]) >= 0 && unhex(s[i+2]) >= 0 {
		return ""
	}
	end := min(i+3, len(s))
	return s[i:end]
}

// unescape decodes the percent-escapes of s, which the caller has
// validated, and with plus also '+' as a space. It returns s itself when
// there is nothing to decode.
func unescape(s string, plus bool) string {
	if strings.IndexByte(s, '%') < 0 && (!plus || strings.IndexByte(s, '+') < 0) {
		return s
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			out = append(out, byte(unhex(s[i+1])<<4|unhex(s[i+2])))
			i += 2
		case plus && c == '+':
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// firstBadEscape returns the first malformed percent-escape in s and its
// offset, or "" if every '%' starts two hex digits.
func firstBadEscape(s string) (string, int) {
	for i := strings.IndexByte(s, '%'); i >= 0; {
		if bad := badEscapeAt(s, i); bad != "" {
			return bad, i
		}
		next := strings.IndexByte(s[i+3:], '%')
		if next < 0 {
			break
		}
		i += 3 + next
	}
	return "", -1
}
