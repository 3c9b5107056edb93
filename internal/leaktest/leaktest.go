// Package leaktest fails a test binary whose goroutines outlive its tests: the
// TestMain of packages that start servers, connections and engines, whose tests
// must stop every goroutine they start.
package leaktest

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
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
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	return runtime.NumGoroutine(), string(buf[:runtime.Stack(buf, true)])
}
