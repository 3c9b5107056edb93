package waitfor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// TB is the part of testing.TB that Until and True use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

// Until polls cond until it returns nil, and fails t if it has not within the
// bound, with the error cond returned last: that error says what it saw instead
// of what the test waits for ("3 rows, want 5").
func Until(t TB, within time.Duration, cond func() error) {
	t.Helper()
	if err := Err(context.Background(), within, cond); err != nil {
		t.Fatalf("%v", err)
	}
}

// True polls cond until it is true, and fails t naming what if it has not
// within the bound.
func True(t TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, within, func() error {
		if cond() {
			return nil
		}
		return errors.New("still waiting for " + what)
	})
}

// Err polls cond until it returns nil (then Err returns nil), the bound passes
// or ctx is done (then Err returns an error naming the bound and what cond last
// returned).
func Err(ctx context.Context, within time.Duration, cond func() error) error {
	start := time.Now()
	deadline := start.Add(within)
	poll := firstPoll
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("waited %v: %w", within, err)
		}
		t.Reset(min(poll, time.Until(deadline)))
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("stopped after %v (%v): %w", time.Since(start).Round(time.Millisecond), context.Cause(ctx), err)
		}
		poll = min(2*poll, maxPoll)
	}
}
