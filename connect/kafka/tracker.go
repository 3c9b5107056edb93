package kafka

import "time"

// entryState is where a record that is not finished stands.
type entryState uint8

const (
	stRead     entryState = iota // fetched and buffered, not emitted yet
	stInflight                   // emitted: its tree is pending
	stFailed                     // its tree failed: to be re-read from Kafka when due
	stDead                       // out of attempts: to be re-read and dead-lettered
	stDLQ                        // being produced to the dead-letter topic
)

type entry struct {
	st       entryState
	attempts int       // emits so far
	due      time.Time // stFailed: not replayed before
	reason   string    // the last failure's reason
}

// readAction is what the spout does with a record fetched from Kafka.
type readAction uint8

const (
	actSkip       readAction = iota // finished, in flight, buffered, or a replay not yet due
	actEmit                         // buffer it to emit
	actDeadLetter                   // produce it to the dead-letter topic
)

// tracker is the state of one partition's records between fetch and commit: the
// contiguous-prefix offset tracker of ingest.Offsets, for Kafka offsets, which have
// gaps (compaction, transaction markers, aborted records). A partition is read in
// order from where it started, so every offset up to maxRead was either fetched or
// is a gap; only the records not finished are kept (open), and the committable
// offset is the lowest of them, or maxRead+1 when none is open. It never passes an
// unfinished record, however many after it are done (STORM-2343, connect#4010).
// Memory is one small entry per record buffered, in flight or waiting for a
// replay; finished records cost nothing. Pure: no clock, goroutine or I/O; not safe
// for concurrent use.
type tracker struct {
	start   int64 // the first offset fetched; -1 before any
	maxRead int64 // the highest offset fetched; -1 before any
	open    map[int64]*entry
	failed  int // entries in stFailed or stDead
	flight  int // entries in stInflight or stDLQ
}

func newTracker() *tracker {
	return &tracker{start: -1, maxRead: -1, open: map[int64]*entry{}}
}

// read classifies a record fetched at off at time now. A record past maxRead is
// new; one at or below it is a re-read (after a seek, or an overlapping fetch):
// emitted again only if its replay is due, dead-lettered if it is out of attempts,
// else skipped.
func (t *tracker) read(off int64, now time.Time) readAction {
	if off > t.maxRead {
		if t.start < 0 {
			t.start = off
		}
		t.maxRead = off
		t.open[off] = &entry{st: stRead}
		return actEmit
	}
	e, ok := t.open[off]
	if !ok {
		return actSkip // finished, or before where this reader started
	}
	switch {
	case e.st == stFailed && !now.Before(e.due):
		e.st = stRead
		t.failed--
		return actEmit
	case e.st == stDead:
		e.st = stDLQ
		t.failed--
		t.flight++
		return actDeadLetter
	}
	return actSkip
}

// emitted records that off's buffered record was emitted (one more attempt).
func (t *tracker) emitted(off int64) {
	if e, ok := t.open[off]; ok && e.st == stRead {
		e.st = stInflight
		e.attempts++
		t.flight++
	}
}

// unemit undoes emitted for an emit that did not happen (the collector refused
// it): the record is re-read at once, and the attempt is not charged.
func (t *tracker) unemit(off int64, now time.Time) {
	if e, ok := t.open[off]; ok && e.st == stInflight {
		e.st, e.due = stFailed, now
		e.attempts--
		t.flight--
		t.failed++
	}
}

// ack finishes off: its tree completed. It reports whether off was in flight.
func (t *tracker) ack(off int64) bool {
	e, ok := t.open[off]
	if !ok || e.st != stInflight {
		return false
	}
	delete(t.open, off)
	t.flight--
	return true
}

// fail records that off's tree failed with reason. With attempts left it is
// replayed (re-read) from due; out of attempts (maxAttempts > 0) it goes to the
// dead-letter topic. It reports whether off was in flight.
func (t *tracker) fail(off int64, reason string, due time.Time, maxAttempts int) bool {
	e, ok := t.open[off]
	if !ok || e.st != stInflight {
		return false
	}
	t.flight--
	t.failed++
	e.reason = reason
	if maxAttempts > 0 && e.attempts >= maxAttempts {
		e.st = stDead
	} else {
		e.st, e.due = stFailed, due
	}
	return true
}

// deadLettered finishes off once the dead-letter topic has it; with err != nil
// the produce failed and the record is re-read to try again.
func (t *tracker) deadLettered(off int64, ok bool) {
	e, found := t.open[off]
	if !found || e.st != stDLQ {
		return
	}
	t.flight--
	if ok {
		delete(t.open, off)
		return
	}
	e.st = stDead
	t.failed++
}

// entry returns off's entry, or nil when off is finished or unknown.
func (t *tracker) entry(off int64) *entry { return t.open[off] }

// committed is the offset to commit: every record fetched below it is finished.
// -1 before anything was fetched.
func (t *tracker) committed() int64 {
	if t.maxRead < 0 {
		return -1
	}
	low := t.maxRead + 1
	for off := range t.open {
		low = min(low, off)
	}
	return low
}

// seekTarget is the lowest offset to re-read from Kafka at now: a failed record
// whose replay is due, or one to dead-letter. ok is false when none is.
func (t *tracker) seekTarget(now time.Time) (off int64, ok bool) {
	if t.failed == 0 {
		return 0, false
	}
	for o, e := range t.open {
		if (e.st == stDead || (e.st == stFailed && !now.Before(e.due))) && (!ok || o < off) {
			off, ok = o, true
		}
	}
	return off, ok
}

// nextDue is the earliest time a failed record's replay falls due; ok is false
// when no record waits for one.
func (t *tracker) nextDue() (due time.Time, ok bool) {
	if t.failed == 0 {
		return due, false
	}
	for _, e := range t.open {
		switch e.st {
		case stDead:
			return time.Time{}, true
		case stFailed:
			if !ok || e.due.Before(due) {
				due, ok = e.due, true
			}
		}
	}
	return due, ok
}

// inflight is the number of records whose tree, or dead-letter produce, is pending.
func (t *tracker) inflight() int { return t.flight }

// waiting is the number of records waiting for a replay or a dead letter.
func (t *tracker) waiting() int { return t.failed }
