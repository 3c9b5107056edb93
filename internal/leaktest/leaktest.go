// Package leaktest fails a test binary whose goroutines outlive its tests: the
// TestMain of packages that start servers, connections and engines, whose tests
// must stop every goroutine they start.
package leaktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
)

// Main runs the tests and exits: with 1 if they failed, or if more goroutines run
// after them than before (the stacks of all are printed).
func Main(m *testing.M) {
	before, _ := Count()
	code := m.Run()
	if code == 0 {
		if n, stacks := Settle(before); n > before {
			fmt.Fprintf(os.Stderr, "%d goroutines before the tests, %d after:\n%s", before, n, stacks)
			code = 1
		}
	}
	os.Exit(code)
}

// Settle waits until at most n goroutines run, or 10 s. A goroutine's exit is no
// event one can wait on: the count is polled (as goleak does), and the stacks of
// what is left returned.
func Settle(n int) (int, string) { return settle(n, 10*time.Second) }

func settle(n int, within time.Duration) (int, string) {
	_ = waitfor.Err(context.Background(), within, func() error {
		if got, _ := Count(); got > n {
			return fmt.Errorf("%d goroutines, want at most %d", got, n)
		}
		return nil
	})
	return Count()
}

// Count returns how many goroutines run and their stacks, both from one dump taken
// with the world stopped. runtime.NumGoroutine is not used: it subtracts free lists
// that the scheduler moves between in batches without a lock, so for an instant it
// can be off by a batch (CI once saw 27 goroutines "after" beside a dump holding one).
func Count() (int, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, line := range bytes.Split(buf, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("goroutine ")) && bytes.HasSuffix(line, []byte("]:")) {
			count++
		}
	}
	return count, string(buf)
}
