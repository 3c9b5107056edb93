package leaktest

import (
	"strings"
	"testing"
	"time"
)

// Count sees a goroutine that is parked, with its stack, and Settle sees it gone once
// it returns.
func TestCountAndSettle(t *testing.T) {
	before, _ := Count()
	started, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go parkedForLeaktest(started, release, done)
	<-started
	n, stacks := Count()
	if n != before+1 || !strings.Contains(stacks, "parkedForLeaktest") {
		t.Fatalf("count %d with a parked goroutine, want %d; stacks:\n%s", n, before+1, stacks)
	}
	if got, _ := settle(before, 50*time.Millisecond); got != before+1 {
		t.Fatalf("Settle(%d) = %d while the goroutine is parked", before, got)
	}
	close(release)
	<-done
	if got, stacks := Settle(before); got != before {
		t.Fatalf("Settle(%d) = %d after it returned:\n%s", before, got, stacks)
	}
}

func parkedForLeaktest(started chan<- struct{}, release <-chan struct{}, done chan<- struct{}) {
	close(started)
	<-release
	close(done)
}
