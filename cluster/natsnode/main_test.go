package natsnode_test

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestMain fails the run if goroutines outlive the tests (every node and connection
// is closed by the tests' cleanups).
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if n, stacks := settle(before); n > before {
			fmt.Fprintf(os.Stderr, "%d goroutines before the tests, %d after:\n%s", before, n, stacks)
			code = 1
		}
	}
	os.Exit(code)
}

// settle waits until at most n goroutines run, or 10 s. Goroutine exits are not
// events one can wait on: the count is polled (as goleak does), and the stacks of
// what is left returned.
func settle(n int) (int, string) {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	buf := make([]byte, 1<<20)
	return runtime.NumGoroutine(), string(buf[:runtime.Stack(buf, true)])
}
