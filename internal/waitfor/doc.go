// Package waitfor is how gale's tests wait: on the state they mean, never on wall
// time alone.
//
// A test that must see something happen (a row reach a sink, a lease move, a
// counter rise) states it as a condition and waits for it with Until or True.
// The condition is polled, first every millisecond and then at most every 50 ms,
// until it holds or the bound passes; then the test fails with what the
// condition last saw, not only "timed out". The bound is a ceiling for a broken
// run, never a figure the test measures: a healthy run returns as soon as the
// condition holds, however slow the machine.
//
// Err is the same wait for code that cannot fail a test (a goroutine, a helper
// returning an error), cut short by its context.
//
// What cannot be polled has its own hook: a channel closed, a counter exported,
// a test hook in the package under test. A sleep that stays in a test says why
// (an outage's length is a sleep by nature).
package waitfor
