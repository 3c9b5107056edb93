package wordcount

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gale-stream/gale/internal/testio"
)

// wordsRef is Words as it was before it skipped lower for plain words: every word
// lowercased by lower.
func wordsRef(line string, fn func(word string, off int)) {
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

type wordAt struct {
	w   string
	off int
}

func collectWords(f func(string, func(string, int)), line string) []wordAt {
	var out []wordAt
	f(line, func(w string, off int) { out = append(out, wordAt{w, off}) })
	return out
}

// Words gives the reference's words and offsets on every line of the books and on
// random lines mixing ASCII, letters of other scripts, digits, invalid UTF-8 and
// punctuation.
func TestWordsMatchesReference(t *testing.T) {
	lines := 0
	for _, name := range testio.Books(t) {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines++
			if got, want := collectWords(Words, sc.Text()), collectWords(wordsRef, sc.Text()); !slices.Equal(got, want) {
				t.Fatalf("%s: %q: %v, want %v", name, sc.Text(), got, want)
			}
		}
		f.Close()
	}
	if lines == 0 {
		t.Fatal("no lines read")
	}
	pieces := []string{"a", "Z", "q", "9", "0", " ", "-", "'", "É", "é", "Ω", "ω", "ß", "\xa3", "\xff", "\r", "\ufeff", "٣", "İ", "K"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b []byte
		for range rng.IntN(12) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		line := string(b)
		if got, want := collectWords(Words, line), collectWords(wordsRef, line); !slices.Equal(got, want) {
			t.Fatalf("%q: %v, want %v", line, got, want)
		}
	}
}

// BenchmarkWords tokenizes the books' lines with Words and with the reference (every
// word through lower), in the same run.
func BenchmarkWords(b *testing.B) {
	var lines []string
	for _, name := range testio.Books(b) {
		data, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	for _, tc := range []struct {
		name string
		f    func(string, func(string, int))
	}{{"Words", Words}, {"reference", wordsRef}} {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				for _, l := range lines {
					tc.f(l, func(string, int) { n++ })
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/word")
		})
	}
}
