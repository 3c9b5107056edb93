package builtin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Found by a breaker: a write the disk could only take part of (disk full, a
// file size limit) left that part of the line in the file; the input was failed
// and its replay appended after it, so the file held a line glued to a broken
// one. The sink now cuts the file back to where the line began. The disk is
// filled here by the process's file size limit (RLIMIT_FSIZE: a write past it
// writes what fits and fails with EFBIG; Go ignores the SIGXFSZ).
func TestFileSinkFailedWriteLeavesNoPartialLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.txt")
	snk, err := NewFileSink(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := snk.open(); err != nil {
		t.Fatal(err)
	}
	defer snk.release()
	line := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i)), 29) + "\n") } // 30 bytes

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 100 // three lines and a third
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("cannot set the file size limit: %v", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	for i := range 3 {
		if err := snk.write(line(i)); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
	}
	err = snk.write(line(3))
	restore()
	if !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("the write past the limit: %v, want EFBIG", err)
	}
	// The replay of the failed line, and the next.
	for i := 3; i < 5; i++ {
		if err := snk.write(line(i)); err != nil {
			t.Fatalf("line %d after the limit was lifted: %v", i, err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := range 5 {
		want = append(want, line(i)...)
	}
	if string(got) != string(want) {
		t.Errorf("the file holds\n%q\nwant\n%q", got, want)
	}
}
