package wordcount

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Words calls fn for every word of line with its byte offset in line. A word is a
// maximal run of Unicode letters or decimal digits (categories L* and Nd), lowercased.
// Bytes that are not valid UTF-8, a byte-order mark and '\r' separate words.
//
// A word of lowercase ASCII letters and digits (most words) is handed over as it is,
// a substring of line; only one holding an uppercase or a non-ASCII letter is
// lowercased (a new string). The scan notes which while it looks for the word's
// end, rather than lower scanning the word again.
func Words(line string, fn func(word string, off int)) {
	start := -1
	plain := true // the word so far is lowercase ASCII letters and digits
	for i := 0; i < len(line); {
		c := line[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
			if start < 0 {
				start, plain = i, true
			}
			i++
			continue
		}
		var isWord bool
		size := 1
		if c < utf8.RuneSelf {
			isWord = 'A' <= c && c <= 'Z'
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(line[i:])
			isWord = r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
		}
		if isWord {
			if start < 0 {
				start = i
			}
			plain = false
		} else if start >= 0 {
			fn(wordOf(line[start:i], plain), start)
			start = -1
		}
		i += size
	}
	if start >= 0 {
		fn(wordOf(line[start:], plain), start)
	}
}

// wordOf returns w lowercased; plain says it is lowercase ASCII already.
func wordOf(w string, plain bool) string {
	if plain {
		return w
	}
	return lower(w)
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
