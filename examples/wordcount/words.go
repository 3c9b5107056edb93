package wordcount

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Words calls fn for every word of line with its byte offset in line. A word is a
// maximal run of Unicode letters or decimal digits (categories L* and Nd), lowercased.
// Bytes that are not valid UTF-8, a byte-order mark and '\r' separate words.
func Words(line string, fn func(word string, off int)) {
	start := -1
	for i := 0; i < len(line); {
		c := line[i]
		var isWord bool
		size := 1
		if c < utf8.RuneSelf {
			isWord = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(line[i:])
			isWord = r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
		}
		if isWord {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			fn(lower(line[start:i]), start)
			start = -1
		}
		i += size
	}
	if start >= 0 {
		fn(lower(line[start:]), start)
	}
}

// lower returns s lowercased, without allocating when it already is (the common case).
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}
