// Package leaktest fails a test binary whose goroutines outlive its tests: the
// TestMain of packages that start servers, connections and engines, whose tests
// must stop every goroutine they start.
package leaktest

import (
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
	before := runtime.NumGoroutine()
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
func Settle(n int) (int, string) {
	_ = waitfor.Err(context.Background(), 10*time.Second, func() error {
		if got := runtime.NumGoroutine(); got > n {
			return fmt.Errorf("%d goroutines, want at most %d", got, n)
		}
		return nil
	})
	buf := make([]byte, 1<<20)
	return runtime.NumGoroutine(), string(buf[:runtime.Stack(buf, true)])
}
