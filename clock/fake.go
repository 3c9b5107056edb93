package clock

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock whose time moves only when Advance is called. It is safe for
// concurrent use: the code under test runs its timers on one goroutine while the test
// advances the clock on another.
//
// A timer or ticker fires when Advance reaches its deadline (not a nanosecond
// before): it sends the deadline on its channel without blocking, into a channel
// buffered for one value, as the time package does; a value nobody has received is
// discarded by the next Stop or Reset, as since Go 1.23. The timers and tickers due
// within one Advance fire in deadline order (in the order they were armed, for equal
// deadlines), all before Advance returns.
//
// A ticker fires at most once per Advance, however many of its periods the Advance
// spans: the ticks missed are dropped, as a time.Ticker drops the ticks of a slow
// receiver. The tick sent carries the first deadline passed, and the next deadline is
// the first one after the new time on the ticker's original phase. A test that wants
// every tick advances by one period at a time.
//
// Fake starts no goroutine.
type Fake struct {
	mu       sync.Mutex
	now      time.Time
	seq      uint64       // arming order, to break ties between equal deadlines
	waiters  []*fakeTimer // armed timers and running tickers
	blockers []*blocker
}

// blocker is a BlockUntil call waiting for n waiters.
type blocker struct {
	n    int
	done chan struct{}
}

// NewFake returns a fake clock whose time is start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires when the clock reaches Now()+d; if d <= 0 it
// fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arm(t, d)
	return t
}

// NewTicker returns a ticker with period d, its first tick at Now()+d. It panics if
// d <= 0, as time.NewTicker does.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{f: f, c: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.arm(t, d)
	return fakeTicker{t}
}

// Advance moves the clock forward by d and fires, in deadline order, every timer and
// ticker whose deadline the new time reaches. It panics if d < 0: time does not go
// back.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Advance by a negative duration")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	var due []*fakeTimer
	for _, t := range f.waiters {
		if !t.deadline.After(f.now) {
			due = append(due, t)
		}
	}
	slices.SortFunc(due, func(a, b *fakeTimer) int {
		if c := a.deadline.Compare(b.deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, t := range due {
		send(t.c, t.deadline)
		if t.period == 0 {
			f.disarm(t)
			continue
		}
		// Drop the periods passed: the next tick is the first after now, in phase.
		missed := f.now.Sub(t.deadline) / t.period
		t.deadline = t.deadline.Add((missed + 1) * t.period)
		f.seq++
		t.seq = f.seq
	}
}

// Waiters returns the number of timers armed and tickers running.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil returns once at least n timers are armed or tickers running (Waiters()
// >= n), or with ctx's error when ctx ends first. A test calls it before Advance so as
// to advance only after the code under test has armed its timer: it waits on that
// event, never on the wall clock.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	f.mu.Lock()
	if len(f.waiters) >= n {
		f.mu.Unlock()
		return nil
	}
	b := &blocker{n: n, done: make(chan struct{})}
	f.blockers = append(f.blockers, b)
	f.mu.Unlock()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		defer f.mu.Unlock()
		f.blockers = slices.DeleteFunc(f.blockers, func(x *blocker) bool { return x == b })
		select {
		case <-b.done: // met while the lock was being taken
			return nil
		default:
		}
		return ctx.Err()
	}
}

// arm sets t's deadline d from now, or fires t at once if it is a timer and d <= 0
// (f.mu held).
func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	if d <= 0 && t.period == 0 {
		f.disarm(t)
		send(t.c, f.now)
		return
	}
	t.deadline = f.now.Add(d)
	f.seq++
	t.seq = f.seq
	if !t.armed {
		t.armed = true
		f.waiters = append(f.waiters, t)
		f.wake()
	}
}

// disarm removes t from the waiters; it reports whether t was armed (f.mu held).
func (f *Fake) disarm(t *fakeTimer) bool {
	if !t.armed {
		return false
	}
	t.armed = false
	f.waiters = slices.DeleteFunc(f.waiters, func(x *fakeTimer) bool { return x == t })
	return true
}

// wake releases the BlockUntil calls whose count is reached (f.mu held).
func (f *Fake) wake() {
	f.blockers = slices.DeleteFunc(f.blockers, func(b *blocker) bool {
		if len(f.waiters) >= b.n {
			close(b.done)
			return true
		}
		return false
	})
}

// send delivers v if the channel's one-value buffer is free, as the time package does.
func send(c chan time.Time, v time.Time) {
	select {
	case c <- v:
	default:
	}
}

// drain discards a value sent and not yet received; it reports whether there was one.
func drain(c chan time.Time) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// fakeTimer is a Fake's Timer (period 0) or Ticker. Its fields are guarded by f.mu.
type fakeTimer struct {
	f        *Fake
	c        chan time.Time
	period   time.Duration
	deadline time.Time
	seq      uint64
	armed    bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Stop implements Timer.Stop; for a ticker, its result is ignored.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	stopped := t.f.disarm(t)
	return drain(t.c) || stopped
}

// Reset implements Timer.Reset and Ticker.Reset.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.period != 0 {
		t.period = d
	}
	active := drain(t.c) || t.armed
	t.f.arm(t, d)
	return active
}

// fakeTicker gives a ticker Ticker's method set.
type fakeTicker struct{ *fakeTimer }

func (t fakeTicker) Stop() { t.fakeTimer.Stop() }
func (t fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	t.fakeTimer.Reset(d)
}
