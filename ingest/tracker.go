package ingest

import (
	"fmt"
	"maps"
	"time"

	"github.com/gale-stream/gale/event"
)

// TrackerConfig sets the retry policy of the Tracker.
type TrackerConfig struct {
	// MaxAttempts is how many times an event is processed before it becomes
	// FAILED_FINAL (default 5), counted per generation (a :retry starts a new one).
	MaxAttempts int
	// BackoffBase is the delay before the second attempt (default 100ms); each later
	// retry waits twice as long as the one before, up to BackoffMax (default 30s).
	BackoffBase, BackoffMax time.Duration
}

func (c *TrackerConfig) defaults() {
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 5
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = 100 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 30 * time.Second
	}
}

// Backoff is the delay after the n-th failed attempt (n ≥ 1): base·2^(n-1), capped.
func (c TrackerConfig) Backoff(n int) time.Duration {
	d := c.BackoffBase
	for i := 1; i < n && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

// Verdict is what Receive decided about an incoming event.
type Verdict uint8

// Verdicts.
const (
	// Fresh: the id is unknown; the event must be appended to the log.
	Fresh Verdict = iota + 1
	// Duplicate: the id is known with the same content; answer its status and
	// write nothing (an ACCEPTED one is still on its way to the log: wait for it).
	Duplicate
	// Conflict: the id is known with other content (409).
	Conflict
)

// Tracker is the event status state machine of the ingest path: per event id, its
// status, attempts and history. It is pure, as etcd's raft: no goroutines, clock
// reads or I/O; time comes in as Unix nanoseconds and the caller does the I/O (log
// appends, status documents) and wakes whoever waits on a change. Not safe for
// concurrent use.
//
// It holds in memory only events in progress; a finished event's status is kept in
// the log's status documents and Forget drops it here.
type Tracker struct {
	cfg   TrackerConfig
	m     map[string]*entry
	steps map[Step]uint64 // transitions made, by step (see Steps)
}

type entry struct {
	st          EventStatus
	hash        event.ContentHash
	genAttempts int
	tbuf        [4]Transition // the first transitions, without a second allocation
	// tentative: received by ReceiveTentative and not yet taken or failed by the
	// log, so its receipt is not counted in Steps yet.
	tentative bool
}

// NewTracker returns an empty tracker.
func NewTracker(cfg TrackerConfig) *Tracker {
	cfg.defaults()
	return &Tracker{cfg: cfg, m: map[string]*entry{}, steps: map[Step]uint64{}}
}

// Config is the effective configuration.
func (t *Tracker) Config() TrackerConfig { return t.cfg }

// Len is the number of events held in memory.
func (t *Tracker) Len() int { return len(t.m) }

// light is the status without its history (for answers, which do not show it).
func (e *entry) light() EventStatus {
	s := e.st
	s.Transitions = nil
	return s
}

func (e *entry) snapshot() EventStatus {
	s := e.st
	s.Transitions = append([]Transition(nil), e.st.Transitions...)
	return s
}

// step makes tr and counts it.
func (t *Tracker) step(e *entry, tr Transition) {
	t.steps[tr.Step]++
	e.step(tr)
}

// Steps returns how many transitions of each step the events have made since the
// tracker was made, so a dashboard can show events received, persisted, completed,
// retried and dead-lettered. The history Load rebuilds for an event read back from
// the log is not counted again.
func (t *Tracker) Steps() map[Step]uint64 { return maps.Clone(t.steps) }

func (e *entry) step(tr Transition) {
	if tr.Status != 0 {
		e.st.Status = tr.Status
	}
	e.st.Transitions = append(e.st.Transitions, tr)
}

// Receive decides what to do with event ev arriving at now with content hash (its
// Hash), and returns its status without the history. known is its durable status
// when the caller found the id in the log's dedupe index (nil otherwise); the index
// is authoritative only for durable records, so an id whose append failed is New
// again (NATS #6415). A stored hash of an older rule is compared with ev's hash
// under that rule. On Fresh the event is held as ACCEPTED.
func (t *Tracker) Receive(now int64, ev *event.Event, hash event.ContentHash, known *EventStatus) (Verdict, EventStatus) {
	id := ev.ID
	if e, ok := t.m[id]; ok {
		if !e.hash.Matches(ev, hash) {
			return Conflict, e.light()
		}
		return Duplicate, e.light()
	}
	if known != nil {
		if !event.MatchesString(known.PayloadHash, ev, hash) {
			return Conflict, *known
		}
		return Duplicate, *known
	}
	e := &entry{hash: hash, st: EventStatus{EventID: id, PayloadHash: hash.String()}}
	e.st.Transitions = e.tbuf[:0]
	t.step(e, Transition{Step: StepReceived, Status: Accepted, At: now})
	t.m[id] = e
	return Fresh, e.light()
}

// ReceiveTentative is Receive for an event whose id the caller did not look up,
// because it publishes it to a log that refuses a record of an id it holds already
// (an optimistic insert, see insertLog). The same verdicts for a held id;
// otherwise Fresh, held as ACCEPTED, with its receipt counted in Steps only once
// the log takes it (Persisted) or fails it (PersistFailed): if the log says the
// id was stored already, Refused drops it and it was never received as new.
func (t *Tracker) ReceiveTentative(now int64, ev *event.Event, hash event.ContentHash) (Verdict, EventStatus) {
	v, st := t.Receive(now, ev, hash, nil)
	if v == Fresh {
		t.steps[StepReceived]-- // counted by Receive under the caller's same lock: never seen
		t.m[ev.ID].tentative = true
	}
	return v, st
}

// counted counts a tentative event's receipt, now that it is known to be new.
func (t *Tracker) counted(e *entry) {
	if e.tentative {
		e.tentative = false
		t.steps[StepReceived]++
	}
}

// Refused drops a tentative event (ReceiveTentative) the log refused because its
// id was stored already, unless the log's reader took it meanwhile (then it holds
// the stored record and stays). It reports whether it dropped it.
func (t *Tracker) Refused(id string) bool {
	e, ok := t.m[id]
	if !ok || !e.tentative || e.st.Status != Accepted {
		return false
	}
	delete(t.m, id)
	return true
}

// Persisted records that the event's log record (seq, generation) is durable. It
// changes only an ACCEPTED event: the log's reader may see a record before its
// appender is told, and whichever comes second is a no-op.
func (t *Tracker) Persisted(now int64, id string, seq uint64, gen uint32) (EventStatus, bool) {
	e, ok := t.m[id]
	if !ok {
		return EventStatus{}, false
	}
	t.counted(e)
	if e.st.Status != Accepted {
		return e.snapshot(), true
	}
	e.st.Seq, e.st.Generation = seq, gen
	t.step(e, Transition{Step: StepPersisted, Status: Persisted, At: now})
	return e.snapshot(), true
}

// PersistFailed drops an event whose append failed: it was never durable, so a retry
// of the same id must be taken in as Fresh. The returned status (FAILED_RETRYABLE, with
// the error) is for whoever waits on it.
func (t *Tracker) PersistFailed(now int64, id string, err error) EventStatus {
	e, ok := t.m[id]
	if !ok {
		return EventStatus{EventID: id, Status: FailedRetryable, LastError: err.Error()}
	}
	delete(t.m, id)
	t.counted(e)
	e.st.LastError = err.Error()
	t.step(e, Transition{Step: StepFailed, Status: FailedRetryable, At: now, Error: err.Error()})
	return e.snapshot()
}

// Load makes the tracker hold a durable event read back from the log (after a
// restart), from its status document if one was kept of this record (prior
// attempts) or else as PERSISTED at persistedAt, when the log says it became
// durable (Unix nanoseconds; 0 if the log does not know: then at its receipt
// time, marked approximate). A document of another generation, or about an
// earlier seq (a record lost to a salvage, rec its resend), is not rec's. An
// event already held is left as it is.
func (t *Tracker) Load(rec *event.Record, doc *EventStatus, persistedAt int64) EventStatus {
	if e, ok := t.m[rec.Event.ID]; ok {
		return e.snapshot()
	}
	e := &entry{hash: rec.Hash}
	if doc != nil && doc.Generation == rec.Generation && !doc.before(rec.Seq) {
		e.st = *doc
		for _, tr := range doc.Transitions {
			if tr.Step == StepStarted {
				e.genAttempts++
			}
			if tr.Step == StepInterrupted {
				e.genAttempts-- // not charged
			}
			if tr.Step == StepResubmitted {
				e.genAttempts = 0
			}
		}
	} else {
		e.st = EventStatus{EventID: rec.Event.ID, PayloadHash: rec.Hash.String()}
		// Rebuilt, not made now: not counted in Steps (the receipt was counted when
		// it happened, or by an earlier process).
		e.step(Transition{Step: StepReceived, Status: Accepted, At: rec.ReceivedAt})
		e.step(persistedStep(rec.ReceivedAt, persistedAt))
	}
	e.st.Seq, e.st.Generation = rec.Seq, rec.Generation
	t.m[rec.Event.ID] = e
	return e.snapshot()
}

// persistedStep is the persisted step of a history rebuilt from the log: at the
// time the log says the record became durable, or, when it does not know (0), at
// the receipt time (the earliest it can have been), marked approximate.
func persistedStep(receivedAt, persistedAt int64) Transition {
	if persistedAt == 0 {
		return Transition{Step: StepPersisted, Status: Persisted, At: receivedAt, Approximate: true}
	}
	return Transition{Step: StepPersisted, Status: Persisted, At: persistedAt}
}

// Started records that an attempt of the event was emitted into the topology and
// returns its number (1 for the first).
func (t *Tracker) Started(now int64, id string) (int, error) {
	e, ok := t.m[id]
	if !ok {
		return 0, fmt.Errorf("ingest: start of %q, which is not held", id)
	}
	if e.st.Status != Persisted {
		return 0, fmt.Errorf("ingest: start of %q in status %s", id, e.st.Status)
	}
	e.st.Attempts++
	e.genAttempts++
	t.step(e, Transition{Step: StepStarted, At: now, Attempt: e.st.Attempts})
	return e.st.Attempts, nil
}

// Failed records a failed attempt. Below max attempts it returns retryAt, when the
// next attempt is due (exponential backoff); at max attempts the event becomes
// FAILED_FINAL with reason as its last error, and final is true.
func (t *Tracker) Failed(now int64, id, reason string) (final bool, retryAt int64, st EventStatus, err error) {
	e, ok := t.m[id]
	if !ok || e.st.Status != Persisted {
		return false, 0, EventStatus{}, fmt.Errorf("ingest: failure of %q, which is not in progress", id)
	}
	if reason == "" {
		reason = "failed without a reason"
	}
	e.st.LastError = reason
	if e.genAttempts >= t.cfg.MaxAttempts {
		t.step(e, Transition{Step: StepDeadLetter, Status: FailedFinal, At: now, Attempt: e.st.Attempts, Error: reason})
		return true, 0, e.snapshot(), nil
	}
	retryAt = now + int64(t.cfg.Backoff(e.genAttempts))
	t.step(e, Transition{Step: StepFailed, At: now, Attempt: e.st.Attempts, Error: reason, RetryAt: retryAt})
	return false, retryAt, e.snapshot(), nil
}

// Interrupted records that an attempt ended through no fault of the event (its tree
// timed out while the sink was unavailable): the attempt is given back, so it counts
// toward neither Attempts nor max attempts, and the event stays PERSISTED for a
// retry whenever the caller emits it again.
func (t *Tracker) Interrupted(now int64, id, reason string) (EventStatus, error) {
	e, ok := t.m[id]
	if !ok || e.st.Status != Persisted || e.genAttempts == 0 {
		return EventStatus{}, fmt.Errorf("ingest: interruption of %q, which is not in progress", id)
	}
	t.step(e, Transition{Step: StepInterrupted, At: now, Attempt: e.st.Attempts, Error: reason})
	e.st.Attempts--
	e.genAttempts--
	return e.snapshot(), nil
}

// GiveUp makes an event FAILED_FINAL without a failed attempt, with reason: for an
// event whose attempts were started max times and never finished (each time the
// process stopped first, e.g. because this event crashed it).
func (t *Tracker) GiveUp(now int64, id, reason string) (EventStatus, error) {
	e, ok := t.m[id]
	if !ok || e.st.Status != Persisted {
		return EventStatus{}, fmt.Errorf("ingest: give up on %q, which is not in progress", id)
	}
	e.st.LastError = reason
	t.step(e, Transition{Step: StepDeadLetter, Status: FailedFinal, At: now, Attempt: e.st.Attempts, Error: reason})
	return e.snapshot(), nil
}

// Exhausted reports whether the event has used every attempt of its generation.
func (t *Tracker) Exhausted(id string) bool {
	e, ok := t.m[id]
	return ok && e.genAttempts >= t.cfg.MaxAttempts
}

// Processed records that the event's tree completed: PROCESSED.
func (t *Tracker) Processed(now int64, id string) (EventStatus, error) {
	e, ok := t.m[id]
	if !ok || e.st.Status != Persisted {
		return EventStatus{}, fmt.Errorf("ingest: completion of %q, which is not in progress", id)
	}
	e.st.LastError = ""
	t.step(e, Transition{Step: StepCompleted, Status: Processed, At: now, Attempt: e.st.Attempts})
	return e.snapshot(), nil
}

// Resubmit starts a new generation for a FAILED_FINAL event (doc is its stored
// status when it is no longer held): it is held as ACCEPTED until its new record is
// durable (then Persisted), with a fresh attempt budget.
//
// The entry takes the new generation at once, so a reader of the log can tell the
// old record (to skip) from the new one (to process).
func (t *Tracker) Resubmit(now int64, id string, doc *EventStatus, hash event.ContentHash) (EventStatus, error) {
	e, ok := t.m[id]
	if !ok {
		if doc == nil {
			return EventStatus{}, fmt.Errorf("ingest: resubmit of unknown event %q", id)
		}
		e = &entry{st: *doc, hash: hash}
	}
	if e.st.Status != FailedFinal {
		return e.snapshot(), fmt.Errorf("ingest: resubmit of %q in status %s: only FAILED_FINAL events can be resubmitted", id, e.st.Status)
	}
	e.genAttempts = 0
	e.st.Generation++
	t.step(e, Transition{Step: StepResubmitted, Status: Accepted, At: now})
	t.m[id] = e
	return e.snapshot(), nil
}

// Get returns the status of a held event.
func (t *Tracker) Get(id string) (EventStatus, bool) {
	e, ok := t.m[id]
	if !ok {
		return EventStatus{}, false
	}
	return e.snapshot(), true
}

// Has reports whether the event is held.
func (t *Tracker) Has(id string) bool {
	_, ok := t.m[id]
	return ok
}

// Forget drops a finished event (its status document is durable).
func (t *Tracker) Forget(id string) { delete(t.m, id) }
