// Package clock lets code take its time from a Clock instead of the time package, so
// that tests drive time by hand: a timeout or a rate test then runs deterministically
// and at once instead of being bounded by the wall clock (the style of etcd-io/raft,
// whose state machines take ticks from their caller).
//
// Production code takes a Clock and is given Real(). A test gives it a *Fake instead:
//
//	fake := clock.NewFake(time.Unix(0, 0))
//	go worker(fake)                       // arms a timer of 10s and waits on it
//	fake.BlockUntil(ctx, 1)               // wait until the timer is armed
//	fake.Advance(10 * time.Second)        // the timer fires now, not a nanosecond before
//
// BlockUntil waits on an event (the code under test has armed its timer), never on
// the wall clock: advancing before the timer is armed would move time past a deadline
// that does not exist yet.
//
// The names follow github.com/jonboulle/clockwork (Advance, BlockUntil, waiters) with
// a smaller interface: Now, Since, NewTimer and NewTicker. Timers and tickers keep the
// time package's semantics, including Go 1.23's: Stop and Reset discard a value sent
// and not yet received, and a slow receiver misses ticks rather than queueing them
// (see Fake for how Advance fires them). The package's tests check Real and Fake
// against each other on the same scenarios, with Real run in a testing/synctest bubble.
package clock
