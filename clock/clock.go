package clock

import "time"

// Clock is the source of time for code that must be testable without waiting on the
// wall clock. Real returns the production clock; NewFake one that tests move by hand.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t: Now().Sub(t).
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that sends the time on its channel once, d after now.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that sends the time on its channel every d. It panics
	// if d <= 0, as time.NewTicker does.
	NewTicker(d time.Duration) Ticker
}

// Timer is a time.Timer behind an interface. Its Stop and Reset behave as the time
// package's do since Go 1.23: after either returns, no value from before the call can
// be received from C.
type Timer interface {
	// C returns the channel on which the timer delivers its time.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It returns true if the call stopped it:
	// false if it had already been stopped, or had fired and its value was received.
	// A value sent but not yet received is discarded and Stop returns true.
	Stop() bool
	// Reset makes the timer fire d from now, discarding a value not yet received. It
	// returns true if the timer was active (or its value still unreceived) before.
	Reset(d time.Duration) bool
}

// Ticker is a time.Ticker behind an interface.
type Ticker interface {
	// C returns the channel on which the ticks are delivered.
	C() <-chan time.Time
	// Stop turns the ticker off and discards a tick not yet received.
	Stop()
	// Reset stops the ticker and restarts it with period d, the next tick d from now.
	// It panics if d <= 0.
	Reset(d time.Duration)
}

// Real returns the wall clock: the time package itself. Now keeps the monotonic clock
// reading, so Since and Sub are immune to wall-clock steps.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker {
	return realTicker{time.NewTicker(d)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }
