// Package testio holds the small pieces of I/O that gale's tests share: a buffer
// safe for concurrent writes (to capture a log), the lines of the test book, and
// the test books' paths.
package testio

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// SyncBuffer is a bytes.Buffer safe for concurrent use: a log handler's writer
// that the test reads while the code under test still writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the lines written so far that contain every one of words (all of
// them, without words), without their line ends.
func (s *SyncBuffer) Lines(words ...string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		all := l != ""
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}

// BookLines returns the non-blank lines of one test book, A Study in Scarlet
// (testdata/books/244-0.txt), without their line ends.
func BookLines(t testing.TB) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root(t), "testdata", "books", "244-0.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimRight(sc.Text(), "\r"); strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// Books returns the paths of the seven public-domain test books
// (testdata/books/*.txt, in name order), as absolute paths.
func Books(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "testdata", "books", "*.txt"))
	if err != nil || len(files) != 7 {
		t.Fatalf("testdata/books: %v %v, want 7 books", files, err)
	}
	return files
}

// root returns the repository's root: the nearest directory above the test's
// working directory (its package's) that holds go.mod.
func root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
