package waitfor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct{ failed string }

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	ft := &fakeT{}
	Until(ft, time.Minute, func() error {
		if n := calls.Add(1); n < 4 {
			return fmt.Errorf("call %d", n)
		}
		return nil
	})
	if ft.failed != "" || calls.Load() != 4 {
		t.Fatalf("failed %q after %d calls, want no failure after 4", ft.failed, calls.Load())
	}
}

func TestUntilFailsWithWhatWasLastSeen(t *testing.T) {
	var calls atomic.Int32
	ft := &fakeT{}
	Until(ft, 30*time.Millisecond, func() error {
		return fmt.Errorf("%d rows, want 5", calls.Add(1))
	})
	n := calls.Load()
	if n < 2 || !strings.Contains(ft.failed, fmt.Sprintf("waited 30ms: %d rows, want 5", n)) {
		t.Fatalf("failure %q after %d calls", ft.failed, n)
	}
}

func TestTrueNamesWhat(t *testing.T) {
	ft := &fakeT{}
	True(ft, 5*time.Millisecond, "the lease to move", func() bool { return false })
	if !strings.Contains(ft.failed, "still waiting for the lease to move") {
		t.Fatalf("failure %q", ft.failed)
	}
}

func TestErrStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("test over")
	var calls atomic.Int32
	err := Err(ctx, time.Hour, func() error {
		if calls.Add(1) == 3 {
			cancel(cause)
		}
		return errors.New("not there")
	})
	if err == nil || !strings.Contains(err.Error(), "test over") || !strings.Contains(err.Error(), "not there") {
		t.Fatalf("Err after cancel: %v", err)
	}
}
