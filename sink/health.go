package sink

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrUnavailable is wrapped by Health.Err while the sink's database does not take
// writes.
var ErrUnavailable = errors.New("sink unavailable")

// ErrGaveUp is wrapped by HealthState.GaveUp once a task gave up on its database
// (Options.GiveUpAfter).
var ErrGaveUp = errors.New("sink gave up on its database")

// Health tells whether a sink's database takes writes. The tasks of the sink bolts
// given it (Options.Health) report to it: a task whose write failed for a reason of
// the database as a whole (see the bolt's doc) is down until one of its writes
// commits again; the sink is unavailable while any task is down. Whoever feeds the
// sink reads it: the ingest log spout emits nothing while the sink is unavailable
// and does not charge an attempt to a tree that timed out during an outage, and
// readiness reports it. Safe for concurrent use.
//
// It logs one line per change of availability (Warn "sink unavailable", Info "sink
// available again"), never one per failed retry.
type Health struct {
	logger *slog.Logger

	// The spout asks on every NextTuple: the two answers it needs are atomics.
	unavailable atomic.Bool
	outages     atomic.Uint64

	mu      sync.Mutex
	down    map[int]error // task id -> why it cannot write
	since   time.Time     // when the current state began
	changed chan struct{}
	gaveUp  chan struct{} // closed at the first giveUp
	gaveErr error
}

// HealthState is a snapshot of a Health.
type HealthState struct {
	// Available is true while every task writes.
	Available bool
	// Reason is why not (the error of the lowest task id that is down), nil while
	// Available.
	Reason error
	// Since is when the current state began (the Health's creation for a sink that
	// never failed).
	Since time.Time
	// Outages is how many outages have begun so far.
	Outages uint64
	// GaveUp is nil unless a task gave up on the database (Options.GiveUpAfter):
	// then it wraps ErrGaveUp and the database's error.
	GaveUp error
}

// NewHealth returns the health of a sink that is available. logger receives the
// line of each change; nil discards them.
func NewHealth(logger *slog.Logger) *Health {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Health{logger: logger, down: map[int]error{}, since: time.Now(), changed: make(chan struct{}), gaveUp: make(chan struct{})}
}

// State returns the current state.
func (h *Health) State() HealthState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HealthState{Available: len(h.down) == 0, Reason: h.reasonLocked(), Since: h.since, Outages: h.outages.Load(), GaveUp: h.gaveErr}
}

// Err is nil while the sink is available, else an error wrapping ErrUnavailable and
// the database's error, saying since when.
func (h *Health) Err() error {
	if !h.unavailable.Load() {
		return nil
	}
	st := h.State()
	if st.Available {
		return nil
	}
	return fmt.Errorf("%w since %s: %w", ErrUnavailable, st.Since.UTC().Format(time.RFC3339), st.Reason)
}

// Outages is how many outages have begun so far: a tree whose life saw this number
// change lived through an outage.
func (h *Health) Outages() uint64 { return h.outages.Load() }

// Changed returns a channel closed at the next change of availability.
func (h *Health) Changed() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// GaveUp returns a channel closed when a task gave up on the database (see
// Options.GiveUpAfter; HealthState.GaveUp says why): the run should end, as the
// sink writes nothing more.
func (h *Health) GaveUp() <-chan struct{} { return h.gaveUp }

// giveUp records that a task stopped retrying because of err (the first one counts).
func (h *Health) giveUp(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gaveErr != nil {
		return
	}
	h.gaveErr = fmt.Errorf("%w: %w", ErrGaveUp, err)
	close(h.gaveUp)
	h.logger.Error("sink gave up: its database failed as a whole for longer than the run allows; no event is charged", "err", err)
}

func (h *Health) reasonLocked() error {
	first, reason := 0, error(nil)
	for task, err := range h.down {
		if reason == nil || task < first {
			first, reason = task, err
		}
	}
	return reason
}

// report records that task cannot write because of err, or (err nil) that it writes.
func (h *Health) report(task int, err error, db *DB) {
	h.mu.Lock()
	wasAvailable := len(h.down) == 0
	if err != nil {
		h.down[task] = err
	} else {
		delete(h.down, task)
	}
	available := len(h.down) == 0
	if wasAvailable == available {
		h.mu.Unlock()
		return
	}
	now := time.Now()
	began := h.since
	h.since = now
	if !available {
		h.outages.Add(1)
	}
	h.unavailable.Store(!available)
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
	if !available {
		h.logger.Warn("sink unavailable: its database fails as a whole, not because of any event; batches are held and retried with backoff, and no event is charged an attempt",
			"db", db.String(), "err", err)
	} else {
		h.logger.Info("sink available again", "db", db.String(), "outage", now.Sub(began).Round(time.Millisecond))
	}
}
