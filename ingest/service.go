package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// Errors of the Service. ErrShuttingDown, eventlog.ErrOverloaded,
// eventlog.ErrFailed and corruption met in the log (event.ErrCorrupt, an
// *eventlog.CorruptError naming the file) are retryable (FAILED_RETRYABLE);
// ErrNotFound is a 404.
var (
	ErrShuttingDown = errors.New("ingest: shutting down")
	ErrNotFound     = errors.New("ingest: no such event")
	// ErrLost is wrapped by Status's error (a *LostError, which wraps ErrNotFound
	// too) for an event whose record a salvage recorded lost, and whose status
	// document did not survive.
	ErrLost = errors.New("ingest: the event's record was lost")
)

// LostError says that the record of an event was lost: a salvage of the damaged
// log could not keep it and recorded its seq lost (GET /v1/lost).
type LostError struct {
	EventID string
	// Seq is the record's seq; 0 if the range (From..To) was recorded before
	// gale kept each id's seq.
	Seq      uint64
	From, To uint64
}

func (e *LostError) Error() string {
	at := fmt.Sprintf("seq %d", e.Seq)
	if e.Seq == 0 {
		at = fmt.Sprintf("one of seqs %d..%d", e.From, e.To)
	}
	return fmt.Sprintf("ingest: the record of %q (%s) was lost: a salvage of the damaged log could not keep it", e.EventID, at)
}

// Unwrap: ErrLost, and ErrNotFound (the log holds nothing of it).
func (e *LostError) Unwrap() []error { return []error{ErrLost, ErrNotFound} }

// UnknownLostError is Status's error for an id the log does not know while lost
// ranges hold seqs whose ids no surviving copy named: it may be one of them.
// It wraps ErrNotFound.
type UnknownLostError struct {
	Seqs uint64 // lost seqs whose ids are unknown
}

func (e *UnknownLostError) Error() string {
	return fmt.Sprintf("ingest: no such event; %d acknowledged seqs whose ids are unknown were lost", e.Seqs)
}

func (e *UnknownLostError) Unwrap() error { return ErrNotFound }

// Log is the durable log a Service takes events into: gale's Pebble log
// (*eventlog.Log), or a replicated one. Its contract is eventlog.Log's: Submit's
// done runs once the records are durable (each Seq set), Lookup answers only for
// durable records, Apply writes status documents, dead letters and the committed
// offset durably, and a failure is sticky (Err).
type Log interface {
	Submit(recs []*event.Record, done func(error)) error
	Append(ctx context.Context, recs ...*event.Record) error
	Err() error
	Damaged() error
	Durable() uint64
	Committed() uint64
	Read(from uint64, max int) ([]event.Record, error)
	ReadSeq(seq uint64) (event.Record, bool, error)
	Lookup(id string) (eventlog.Entry, bool, error)
	MayContain(id string) bool
	Apply(w *eventlog.Write) error
	Get(ns eventlog.Namespace, id string) ([]byte, bool, error)
	Scan(ns eventlog.Namespace, fn func(id string, doc []byte) bool) error
	Trim(cutoff int64) (int, error)
	Lost() []eventlog.LostRange
}

// Config configures a Service.
type Config struct {
	// Log is the durable log (required). The Service does not close it.
	Log Log
	// Tracker sets max attempts and backoff.
	Tracker TrackerConfig
	// DefaultLevel is the ack level when neither the request nor its source names
	// one (default persisted).
	DefaultLevel Level
	// SourceLevels sets a default ack level per source (seed 004: debug logs
	// accepted, metrics persisted, orders processed).
	SourceLevels map[string]Level
	// ProcessedWait bounds how long an ack=processed answer waits (default 10s); when
	// it passes the answer gives the status reached, e.g. PERSISTED, never a failure.
	ProcessedWait time.Duration
	// FlushEvery is how often status documents and the committed offset are synced
	// (default 50ms).
	FlushEvery time.Duration
	// DedupeWindow is how long an event id is remembered at least (default 7 days):
	// finished events older than it are trimmed from the log every TrimEvery
	// (default 10 minutes). A later event with a trimmed id is a new event.
	DedupeWindow, TrimEvery time.Duration
	// Sink, if set, tells whether the sink the spout feeds takes writes
	// (sink.Health implements it). While it does not, the log spout emits nothing,
	// a tree that timed out during or across an outage is replayed without charging
	// the event an attempt, and Ready reports the sink unavailable.
	Sink SinkHealth
	// Durability says what PERSISTED means with this log, in every answer that
	// names a seq (Answer.Durability): "fsync" for the local Pebble log; for a replicated log
	// "replicated:N+fsync" (N copies, each server fsyncing every write),
	// "replicated:N" (N copies, not each fsynced) or "unknown". Default: the log's
	// own Durability() string if it has one, else "fsync".
	Durability string
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
}

// SinkHealth is what the service needs to know of the sink downstream of its spout.
type SinkHealth interface {
	// Err is nil while the sink takes writes, else why not.
	Err() error
	// Outages is how many outages have begun so far (a tree whose life saw it
	// change lived through one).
	Outages() uint64
}

// Service is the ingest front door's core: it takes events in, answers at the
// requested level, feeds the log spout, and keeps every event's status. The HTTP
// server is a thin layer over it. Safe for concurrent use.
type Service struct {
	cfg Config
	log Log
	now func() int64

	mu      sync.Mutex
	tr      *Tracker
	waiters map[string][]chan struct{}
	offsets *Offsets
	docs    map[string]EventStatus // status documents to sync at the next flush
	// abandoned are the records whose trees the last log spout left in flight when
	// it closed (ChargeAbandoned).
	abandoned []*event.Record
	dead      map[string]bool // dead-letter documents to set (true) or delete (false)
	finished  map[string]bool // held events that may be forgotten once flushed
	// recoveryEnd is the log's end when the service started: records up to it were
	// pending when the process last stopped (see startRecovered).
	recoveryEnd uint64
	prestarted  map[uint64]bool // recovered seqs whose attempt is already recorded
	closing     bool
	draining    chan struct{} // closed by Drain
	// unsynced holds finished events whose final status document is not durable
	// yet: their PROCESSED or FAILED_FINAL is not answered before the flush that
	// writes it (a crash in between would otherwise show them PERSISTED again).
	unsynced  map[string]bool
	kick      chan struct{} // asks the flusher for a flush now (someone waits)
	flushMu   sync.Mutex    // one flush at a time, so documents land in order
	flushes   atomic.Uint64 // flushes run (Stats.Flushes)
	closeOnce sync.Once
	inflight  sync.WaitGroup // submissions under way, so Close can answer them all
	counts    counts         // for metrics (counts.go)
	// durability is the word every answer with a seq carries (Config.Durability, or what
	// SetDurability said since).
	durability atomic.Pointer[string]

	stop, stopped chan struct{}
}

// New starts a Service over cfg.Log. Close stops it.
func New(cfg Config) (*Service, error) {
	if cfg.Log == nil {
		return nil, errors.New("ingest: Config.Log is required")
	}
	if cfg.DefaultLevel == 0 {
		cfg.DefaultLevel = LevelPersisted
	}
	if cfg.ProcessedWait <= 0 {
		cfg.ProcessedWait = 10 * time.Second
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 50 * time.Millisecond
	}
	if cfg.DedupeWindow <= 0 {
		cfg.DedupeWindow = 7 * 24 * time.Hour
	}
	if cfg.TrimEvery <= 0 {
		cfg.TrimEvery = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Durability == "" {
		cfg.Durability = "fsync"
		if d, ok := cfg.Log.(interface{ Durability() string }); ok && d.Durability() != "" {
			cfg.Durability = d.Durability()
		}
	}
	s := &Service{
		cfg:      cfg,
		log:      cfg.Log,
		now:      func() int64 { return cfg.Now().UnixNano() },
		tr:       NewTracker(cfg.Tracker),
		waiters:  map[string][]chan struct{}{},
		offsets:  NewOffsets(cfg.Log.Committed()),
		docs:     map[string]EventStatus{},
		dead:     map[string]bool{},
		finished: map[string]bool{},
		draining: make(chan struct{}),
		unsynced: map[string]bool{},
		kick:     make(chan struct{}, 1),

		recoveryEnd: cfg.Log.Durable(),
		prestarted:  map[uint64]bool{},
		stop:        make(chan struct{}),
		stopped:     make(chan struct{}),
	}
	s.durability.Store(&cfg.Durability)
	for _, r := range cfg.Log.Lost() {
		// No record will finish these: the committed offset must not wait for them.
		s.offsets.Skip(r.From, r.To)
	}
	if w, ok := cfg.Log.(statusWatcher); ok {
		w.OnStatusChange(s.statusChanged)
	}
	if g, ok := cfg.Log.(statusGuarder); ok {
		g.GuardStatus(statusUnfinished, statusReplaces)
	}
	go s.flusher()
	return s, nil
}

// Result is the answer for one event.
type Result struct {
	Status EventStatus
	// Duplicate is true when the id was known with the same content: nothing was
	// written and Status is the existing one (with RecordLost, the document of a
	// PROCESSED event whose record a salvage lost).
	Duplicate bool
	// Err explains a FAILED_* status or a conflict. Wraps ErrConflict for a known id
	// with other content, event.ErrInvalid for bad input, eventlog.ErrOverloaded,
	// eventlog.ErrFailed or ErrShuttingDown for retryable refusals.
	Err error
}

// Durability is what PERSISTED means now, the word every answer that names a
// seq carries.
func (s *Service) Durability() string { return *s.durability.Load() }

// SetDurability changes the word every answer with a seq carries from now on (the servers
// of a replicated log changed how they sync, or can no longer be asked), and
// returns the word before.
func (s *Service) SetDurability(word string) (before string) {
	return *s.durability.Swap(&word)
}

// ErrConflict is wrapped by a Result.Err when an id is reused with other content.
var ErrConflict = errors.New("event_id already used with a different payload")

// LevelFor is the ack level for an event of source when the request named none.
func (s *Service) LevelFor(source string) Level {
	if l, ok := s.cfg.SourceLevels[source]; ok {
		return l
	}
	return s.cfg.DefaultLevel
}

// Submit takes events in and answers each at level (0: its source's default), with
// one log append (one group commit) for all the new ones. ctx bounds every wait;
// wait bounds an ack=processed wait (0: Config.ProcessedWait), after which the
// answer is the status reached (e.g. PERSISTED). Results are in input order.
func (s *Service) Submit(ctx context.Context, evs []event.Event, level Level, wait time.Duration) []Result {
	res := make([]Result, len(evs))
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		for i := range res {
			res[i] = retryable(evs[i].ID, ErrShuttingDown)
		}
		return res
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()

	hashes := make([]event.ContentHash, len(evs))
	for i := range evs {
		hashes[i] = evs[i].Hash()
	}
	// opt: the event goes to an insertLog unlooked-up (see insertLog).
	ins, _ := s.log.(insertLog)
	var opt []bool
	if ins != nil {
		opt = make([]bool, len(evs))
		for i := range evs {
			opt[i] = s.levelOf(evs[i], level) > LevelAccepted
		}
	}
	// Ids the log's in-memory filter may know are looked up in the durable index
	// first, outside the lock (true duplicates: a resent file holds the lock for
	// nobody). A durable status never goes away (but by Trim, past the window).
	known := make([]*EventStatus, len(evs))
	// lost[i]: the surviving status document of evs[i]'s record, which a
	// salvage recorded lost (only looked for on a log with lost ranges).
	var lost []*EventStatus
	ranges := s.log.Lost()
	if len(ranges) > 0 {
		lost = make([]*EventStatus, len(evs))
	}
	for i := range evs {
		if lost != nil {
			d, err := s.lostResend(evs[i].ID, ranges)
			if err != nil {
				res[i] = retryable(evs[i].ID, err)
				continue
			}
			if lost[i] = d; d != nil {
				continue // the log holds no record of it
			}
		}
		if (opt == nil || !opt[i]) && s.log.MayContain(evs[i].ID) {
			k, err := s.durableStatus(evs[i].ID)
			if err != nil {
				res[i] = retryable(evs[i].ID, err)
				continue
			}
			known[i] = k
		}
	}
	now := s.now()
	var recs []*event.Record
	var srcs []*sourceCounts                 // recs' sources' counters
	var recOpt []bool                        // recs' opt
	var evOf []int                           // recs' indexes in evs
	var recDead []bool                       // recs' lost record was a dead letter's: it goes once they are stored
	recOf := make([]*event.Record, len(evs)) // non-nil: a new event, and its record
	// One lock for the decision: an id leaves memory only once its record is
	// durable (then the index knows it), so "not held, and not in the index"
	// under this lock means new. The index is asked again here only for ids the
	// filter may know that were not found above (~1% false positives, and ids that
	// became durable meanwhile), so the I/O under the lock is rare.
	s.mu.Lock()
	for i := range evs {
		if res[i].Err != nil {
			continue
		}
		id := evs[i].ID
		optimistic := opt != nil && opt[i]
		known := known[i]
		dead := false
		if lost != nil && lost[i] != nil {
			if lost[i].Status == Processed {
				// Applied before its record was lost, and the sink has its row:
				// with the same payload a duplicate, else a conflict, as for a
				// record still stored. Nothing is stored again.
				known, optimistic = lost[i], false
			} else {
				// Unfinished, or a dead letter that :retry cannot resend (its
				// record is gone): a new event, processed at a new seq.
				dead = lost[i].Status == FailedFinal
			}
		}
		if known == nil && !optimistic && !s.tr.Has(id) && s.log.MayContain(id) {
			k, err := s.durableStatus(id)
			if err != nil {
				res[i] = retryable(id, err)
				continue
			}
			known = k
		}
		var v Verdict
		var st EventStatus
		if optimistic {
			v, st = s.tr.ReceiveTentative(now, &evs[i], hashes[i])
		} else {
			v, st = s.tr.Receive(now, &evs[i], hashes[i], known)
		}
		switch v {
		case Fresh:
			recOf[i] = &event.Record{ReceivedAt: now, Hash: hashes[i], Event: evs[i]}
			recs = append(recs, recOf[i])
			sc := s.counts.source(evs[i].Source)
			if !optimistic { // else once the log says it is new (counts.persisted)
				sc.status[Accepted].Add(1)
			}
			srcs = append(srcs, sc)
			recOpt = append(recOpt, optimistic)
			evOf = append(evOf, i)
			recDead = append(recDead, dead)
			res[i] = Result{Status: st}
		case Duplicate: // counted once answered (below)
			res[i] = Result{Status: st, Duplicate: true}
		case Conflict:
			res[i] = conflict(&evs[i], hashes[i], st)
		}
	}
	s.mu.Unlock()

	var refused error
	appendErrs := make([]error, len(evs)) // per new event: its append's error
	stored := make([]bool, len(evs))      // per new event: refused, its id stored already
	appended := make(chan struct{})
	if len(recs) > 0 {
		done := func(errs []error) {
			var ex []bool // recs refused: their id is stored already
			if ins != nil {
				ex = make([]bool, len(recs))
				for j, err := range errs {
					ex[j] = err != nil && recOpt[j] && ins.Exists(err)
				}
			}
			s.appended(recs, errs, ex)
			s.lostDeadReplaced(recs, recDead, errs, ex)
			s.counts.persisted(srcs, recOpt, errs, ex)
			for j, err := range errs {
				appendErrs[evOf[j]] = err
				stored[evOf[j]] = ex != nil && ex[j]
			}
			close(appended)
		}
		var err error
		if ins != nil {
			err = ins.SubmitEach(recs, done)
		} else {
			err = s.log.Submit(recs, func(err error) { done(sameErr(err, len(recs))) })
		}
		if err != nil {
			// Refused at once (overloaded, failed, closed): not even ACCEPTED.
			errs := sameErr(err, len(recs))
			s.appended(recs, errs, nil)
			s.counts.persisted(srcs, recOpt, errs, nil)
			refused = err
			close(appended)
		}
	} else {
		close(appended)
	}
	waitSync := false
	for i, r := range recOf {
		waitSync = waitSync || (r != nil && s.levelOf(evs[i], level) > LevelAccepted)
	}
	synced := true
	if waitSync {
		select {
		case <-appended:
		case <-ctx.Done():
			synced = false
		}
	}
	deadline := time.Now().Add(s.cfg.ProcessedWait)
	if wait > 0 {
		deadline = time.Now().Add(wait)
	}
	for i := range evs {
		if res[i].Err != nil {
			continue
		}
		lvl := s.levelOf(evs[i], level)
		if !res[i].Duplicate { // a new event
			if refused != nil {
				res[i] = retryable(evs[i].ID, refused)
				continue
			}
			if lvl == LevelAccepted {
				continue
			}
			if !synced {
				// The record may still become durable; a retry will find it.
				res[i] = retryable(evs[i].ID, fmt.Errorf("answer abandoned before the sync: %w", ctx.Err()))
				continue
			}
			if stored[i] {
				// Not new after all: answered as a duplicate (waiting as one,
				// below) or a conflict, from the stored record.
				var dup bool
				if res[i], dup = s.storedAnswer(&evs[i], hashes[i], appendErrs[i]); !dup {
					continue
				}
			} else if appendErrs[i] != nil {
				res[i] = retryable(evs[i].ID, appendErrs[i])
				continue
			} else if lvl == LevelPersisted {
				// Durable now; processing may be further along, PERSISTED stays true.
				res[i].Status.Status, res[i].Status.Seq = Persisted, recOf[i].Seq
				continue
			}
		}
		if res[i].Duplicate && res[i].Status.RecordLost {
			// The surviving document of a lost record: final, and the log holds
			// nothing of it to wait for.
			s.counts.dups.Add(1)
			continue
		}
		until := func(st Status) bool { return st != Accepted }
		if lvl == LevelProcessed {
			until = func(st Status) bool { return st != Accepted && st != Persisted }
		} else if lvl == LevelAccepted {
			until = func(Status) bool { return true }
		}
		st, err := s.waitFor(ctx, evs[i].ID, until, deadline)
		// A duplicate of a copy that was not stored after all: the log holds the
		// id with other content (another serve process stored it meanwhile).
		conflicted := err == nil && res[i].Duplicate && st.PayloadHash != "" &&
			!event.MatchesString(st.PayloadHash, &evs[i], hashes[i])
		if res[i].Duplicate && !conflicted {
			s.counts.dups.Add(1)
		}
		switch {
		case err != nil:
			res[i] = retryable(evs[i].ID, err)
		case conflicted:
			res[i] = conflict(&evs[i], hashes[i], st)
		case st.Status == FailedRetryable:
			res[i] = Result{Status: st, Duplicate: res[i].Duplicate, Err: errors.New(st.LastError)}
		default:
			res[i].Status = st
		}
	}
	return res
}

// lostResend is, for an id a salvage may have lost the record of (lost: the
// log's lost ranges), the status document that survived that record
// (RecordLost and LostSeq set), if the log holds no record of the id now; else
// nil. Only while the loss is within the dedupe window (a later resend is a new
// event, as of any id past it), and only for an id a lost range names or while
// a range holds seqs whose ids are unknown (a JetStream salvage cannot name
// them): on such a log, one more document read per event taken in.
func (s *Service) lostResend(id string, lost []eventlog.LostRange) (*EventStatus, error) {
	now := s.now()
	may := false
	for i := range lost {
		if lost[i].At != 0 && now-lost[i].At >= int64(s.cfg.DedupeWindow) {
			continue
		}
		if _, named := lost[i].SeqOf(id); named || lost[i].Unknown() > 0 {
			may = true
			break
		}
	}
	if !may {
		return nil, nil
	}
	doc, err := s.statusDoc(id)
	if err != nil || doc == nil || doc.Seq == 0 || !lostCover(lost, doc.Seq) {
		return nil, err
	}
	if _, ok, err := s.log.Lookup(id); err != nil || ok {
		return nil, err // a record is stored (it was sent again): it answers
	}
	doc.RecordLost, doc.LostSeq = true, doc.Seq
	return doc, nil
}

// lostDeadReplaced deletes the dead letters of the events stored as resends
// of lost dead letters (dead[i] for recs[i]; errs and stored as in appended):
// the record it names is gone, and the new one is processed.
func (s *Service) lostDeadReplaced(recs []*event.Record, dead []bool, errs []error, stored []bool) {
	if !slices.Contains(dead, true) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range recs {
		if dead[i] && errs[i] == nil && (stored == nil || !stored[i]) {
			if set, ok := s.dead[r.Event.ID]; !ok || !set {
				s.dead[r.Event.ID] = false
			}
		}
	}
}

func (s *Service) levelOf(ev event.Event, level Level) Level {
	if level != 0 {
		return level
	}
	return s.LevelFor(ev.Source)
}

func retryable(id string, err error) Result {
	return Result{Status: EventStatus{EventID: id, Status: FailedRetryable, LastError: err.Error()}, Err: err}
}

// appended is the log's answer for a group of new records (writer goroutine):
// errs[i] is recs[i]'s error, nil if it is durable. stored[i] (stored may be nil)
// says an insertLog refused recs[i] because its id is stored already: its tentative
// entry is dropped without a failure (Tracker.Refused), and its waiters read the
// stored record.
func (s *Service) appended(recs []*event.Record, errs []error, stored []bool) {
	now := s.now()
	// When they became durable, as the log says (one group commit holds a
	// Submit's records: the last one's time is every one's).
	var last uint64
	for i, r := range recs {
		if errs[i] == nil && (stored == nil || !stored[i]) {
			last = max(last, r.Seq)
		}
	}
	persistedAt := now
	if last > 0 {
		persistedAt = s.persistedAt(last)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range recs {
		if stored != nil && stored[i] {
			s.tr.Refused(r.Event.ID)
		} else if errs[i] != nil {
			s.tr.PersistFailed(now, r.Event.ID, errs[i])
		} else if st, _ := s.tr.Persisted(persistedAt, r.Event.ID, r.Seq, r.Generation); st.Status == Persisted && st.Attempts == 0 {
			// Durable and not yet taken by the spout: its status now lives in the
			// log (the dedupe entry says PERSISTED), so memory holds only events
			// in progress however long the backlog.
			s.tr.Forget(r.Event.ID)
		}
		s.wakeLocked(r.Event.ID)
	}
}

func (s *Service) wakeLocked(id string) {
	for _, ch := range s.waiters[id] {
		close(ch)
	}
	delete(s.waiters, id)
}

// statusWatcher is a log several serve processes share (jslog): it tells of the
// status documents any of them stores, so that an answer waiting here for an event
// that another process processes (ack=processed) is woken.
type statusWatcher interface {
	OnStatusChange(fn func(id string))
}

// statusGuarder is a log several serve processes write status documents to
// (jslog): a document of an unfinished status is written only over a stored one
// that statusReplaces allows, so that a process that lost the log spout's lease
// (a late flush, a tree that outlived its term) never turns another's PROCESSED
// or FAILED_FINAL back into PERSISTED, leaving the event unfinished for good.
type statusGuarder interface {
	GuardStatus(guarded func(doc []byte) bool, replaces func(stored, doc []byte) bool)
}

// docHead is what statusReplaces reads of a status document.
type docHead struct {
	Status     Status `json:"status"`
	Seq        uint64 `json:"seq"`
	Generation uint32 `json:"generation"`
}

func (h docHead) final() bool { return h.Status == Processed || h.Status == FailedFinal }

// statusUnfinished reports whether doc is a status document of an unfinished
// event: the ones statusReplaces decides on (final ones are always written).
func statusUnfinished(doc []byte) bool {
	var h docHead
	return json.Unmarshal(doc, &h) != nil || !h.final()
}

// statusReplaces reports whether the unfinished status doc may replace stored:
// not over a later record (a later generation, or the resend of a record lost
// to a salvage, at a later seq), nor over a final status of its own (no process
// starts a finished record again; only a stale writer says otherwise). Over an
// earlier record's, it may.
func statusReplaces(stored, doc []byte) bool {
	var s, d docHead
	if json.Unmarshal(stored, &s) != nil || json.Unmarshal(doc, &d) != nil {
		return true
	}
	if s.Seq != 0 && d.Seq != 0 && s.Seq != d.Seq {
		return d.Seq > s.Seq
	}
	if d.Generation != s.Generation {
		return d.Generation > s.Generation
	}
	return !s.final()
}

// statusChanged wakes whoever waits here for id: another process stored its
// status document (the log's watch goroutine).
func (s *Service) statusChanged(id string) {
	s.mu.Lock()
	if len(s.waiters[id]) > 0 {
		s.wakeLocked(id)
	}
	s.mu.Unlock()
}

// sharedRecheck is how often an answer waiting for an event that another process
// processes looks at its status document again, in case the watch missed it (an
// outage between two watches).
const sharedRecheck = time.Second

// errAppendLost answers a duplicate that waited on a first copy whose append failed.
var errAppendLost = errors.New("not persisted: the append that carried this event_id failed; send it again")

// waitFor waits until the event's status satisfies until, ctx ends (error) or the
// deadline passes (the status reached, no error).
func (s *Service) waitFor(ctx context.Context, id string, until func(Status) bool, deadline time.Time) (EventStatus, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Register before looking, so no transition can slip between the two.
		s.mu.Lock()
		e, held := s.tr.m[id]
		var st EventStatus
		if held {
			var unsynced bool
			if st, unsynced = s.visibleLocked(e); unsynced && s.log.Err() != nil {
				s.mu.Unlock()
				return st, nil // its flush will never come: PERSISTED is the answer
			}
		}
		ch := make(chan struct{})
		s.waiters[id] = append(s.waiters[id], ch)
		s.mu.Unlock()
		if !held {
			// Not in memory: persisted and waiting for the spout, finished and
			// flushed, or never persisted.
			d, err := s.durableStatus(id)
			if err != nil {
				s.unwait(id, ch)
				return EventStatus{}, err
			}
			if d == nil {
				s.unwait(id, ch)
				return EventStatus{EventID: id, Status: FailedRetryable, LastError: errAppendLost.Error()}, nil
			}
			st = *d
			st.Transitions = nil
		}
		if until(st.Status) {
			s.unwait(id, ch)
			return st, nil
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		var recheck <-chan time.Time
		if _, shared := s.log.(statusWatcher); shared && !held {
			recheck = time.After(sharedRecheck)
		}
		select {
		case <-recheck:
			s.unwait(id, ch)
		case <-ch:
		case <-ctx.Done():
			s.unwait(id, ch)
			return st, ctx.Err()
		case <-timer.C:
			s.unwait(id, ch)
			return st, nil
		case <-s.draining:
			s.unwait(id, ch)
			return st, nil // shutting down: the status reached is the answer
		}
	}
}

// visibleLocked is a held event's status (without history) as readers may see it: a
// finished event whose final document is not durable yet shows PERSISTED, what a
// crash would leave, and the flusher is asked to flush now (s.mu held).
func (s *Service) visibleLocked(e *entry) (st EventStatus, unsynced bool) {
	st = e.light()
	if s.unsynced[st.EventID] && (st.Status == Processed || st.Status == FailedFinal) {
		st.Status = Persisted
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return st, true
	}
	return st, false
}

// unwait removes a waiter that is leaving without being woken.
func (s *Service) unwait(id string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.waiters[id]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(s.waiters, id)
	} else {
		s.waiters[id] = ws
	}
}

// durableStatus is the status of an id not held in memory: from its status
// document, or PERSISTED from the dedupe index; nil if the log does not know it.
func (s *Service) durableStatus(id string) (*EventStatus, error) {
	e, ok, err := s.log.Lookup(id)
	if err != nil || !ok {
		return nil, err
	}
	doc, err := s.statusDoc(id)
	if err != nil {
		return nil, err
	}
	if doc != nil && doc.Generation >= e.Generation && doc.before(e.Seq) {
		// About a record of this generation that is gone (lost to a salvage):
		// the one stored is its resend, a new event with a history of its own.
		doc = nil
	}
	if doc != nil && doc.Generation >= e.Generation {
		return doc, nil
	}
	st := &EventStatus{EventID: id, Status: Persisted, Seq: e.Seq, Generation: e.Generation,
		PayloadHash: e.Hash.String()}
	if doc != nil { // an older generation's history, then the resubmitted record
		st.Attempts, st.Transitions = doc.Attempts, doc.Transitions
	}
	if doc == nil {
		st.Transitions = append(st.Transitions, Transition{Step: StepReceived, Status: Accepted, At: e.ReceivedAt})
	}
	st.Transitions = append(st.Transitions, persistedStep(e.ReceivedAt, e.PersistedAt))
	return st, nil
}

// persistTimer is a log that says when a record became durable by its seq, also
// one it has just made durable (the Pebble log: its group commits' sync times).
type persistTimer interface {
	PersistedAt(seq uint64) (at int64, ok bool, err error)
}

// persistedAt is when the record at seq became durable, as the log says, or
// else now: the caller has just learned it is durable, so it was by now.
func (s *Service) persistedAt(seq uint64) int64 {
	if p, ok := s.log.(persistTimer); ok {
		if at, ok, err := p.PersistedAt(seq); ok && err == nil {
			return at
		}
	}
	return s.now()
}

// loadedAt is, for a record read back from the log, when it became durable:
// from its dedupe entry (dv) if that is the record's, else as the log says by
// seq; 0 if the log does not know (Tracker.Load then shows the receipt time,
// marked approximate).
func (s *Service) loadedAt(rec *event.Record, dv durableView) int64 {
	if dv.inIdx && dv.entry.Seq == rec.Seq {
		return dv.entry.PersistedAt // the log's Lookup asked already
	}
	if p, ok := s.log.(persistTimer); ok {
		if at, ok, err := p.PersistedAt(rec.Seq); ok && err == nil {
			return at
		}
	}
	return 0
}

func (s *Service) statusDoc(id string) (*EventStatus, error) {
	b, ok, err := s.log.Get(eventlog.Status, id)
	if err != nil || !ok {
		return nil, err
	}
	var st EventStatus
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("ingest: status document of %q: %w", id, err)
	}
	return &st, nil
}

// Status is the current status of an event: ErrNotFound if the id is unknown. For
// an id whose record a salvage recorded lost (see lostStatus): its status
// document with RecordLost if it survived, else a *LostError; an unknown id while
// lost seqs of unknown ids exist is an *UnknownLostError.
func (s *Service) Status(id string) (EventStatus, error) {
	s.mu.Lock()
	e, held := s.tr.m[id]
	var st EventStatus
	if held {
		st, _ = s.visibleLocked(e)
		st.Transitions = e.snapshot().Transitions // GET shows the history
	}
	s.mu.Unlock()
	if held {
		return st, nil
	}
	d, err := s.durableStatus(id)
	if err != nil {
		return EventStatus{}, err
	}
	if d == nil {
		return s.lostStatus(id)
	}
	return *d, nil
}

// lostStatus answers for an id the log has no record of (not in its dedupe
// index), after a salvage recorded seqs lost. A lost range that names the id,
// or a status document of the id whose seq a lost range covers (a JetStream
// log keeps documents apart from the stream, and its salvage cannot name ids),
// tells that its record was lost: with that document, if it survived,
// RecordLost and the seq; else a *LostError. Otherwise ErrNotFound, an
// *UnknownLostError if lost seqs of unknown ids exist.
//
// Taking a new event in reads such a document too (lostResend): a resend of a
// lost id whose document says PROCESSED is its duplicate or a conflict; any
// other is a new event.
func (s *Service) lostStatus(id string) (EventStatus, error) {
	lost := s.log.Lost()
	if len(lost) == 0 {
		return EventStatus{}, ErrNotFound
	}
	var named *eventlog.LostRange
	var seq uint64
	var unknown uint64
	for i := range lost {
		if q, ok := lost[i].SeqOf(id); ok && named == nil {
			named, seq = &lost[i], q
		}
		unknown += lost[i].Unknown()
	}
	doc, err := s.statusDoc(id)
	if err != nil {
		return EventStatus{}, err
	}
	if doc != nil && doc.Seq != 0 && (named != nil || lostCover(lost, doc.Seq)) {
		st := *doc
		st.RecordLost, st.LostSeq = true, doc.Seq
		return st, nil
	}
	if named != nil {
		return EventStatus{}, &LostError{EventID: id, Seq: seq, From: named.From, To: named.To}
	}
	if unknown > 0 {
		return EventStatus{}, &UnknownLostError{Seqs: unknown}
	}
	return EventStatus{}, ErrNotFound
}

// lostCover says whether a lost range covers seq.
func lostCover(lost []eventlog.LostRange, seq uint64) bool {
	for _, r := range lost {
		if r.From <= seq && seq <= r.To {
			return true
		}
	}
	return false
}

// DeadLetter is an event that ended FAILED_FINAL after max attempts.
type DeadLetter struct {
	EventID   string `json:"event_id"`
	Seq       uint64 `json:"seq"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
	At        int64  `json:"at_unix_nano"`
}

// DeadLetters lists up to limit dead letters in event id order.
func (s *Service) DeadLetters(limit int) ([]DeadLetter, error) {
	s.flush() // so the list includes every event dead-lettered until now (flushes are serialised)
	var out []DeadLetter
	var derr error
	err := s.log.Scan(eventlog.DeadLetter, func(id string, doc []byte) bool {
		var d DeadLetter
		if derr = json.Unmarshal(doc, &d); derr != nil {
			derr = fmt.Errorf("ingest: dead letter %q: %w", id, derr)
			return false
		}
		out = append(out, d)
		return len(out) < limit
	})
	if err == nil {
		err = derr
	}
	return out, err
}

// Resubmit sends a dead-lettered event again as a new generation with a fresh
// attempt budget (POST /v1/events/{id}:retry), waiting until its new record is
// durable. ErrNotFound if unknown; an error naming the status if it is not
// FAILED_FINAL.
func (s *Service) Resubmit(ctx context.Context, id string) (EventStatus, error) {
	st, err := s.Status(id)
	if err != nil {
		return st, err
	}
	if st.Status != FailedFinal {
		return st, fmt.Errorf("ingest: %q is %s: only FAILED_FINAL events can be resubmitted", id, st.Status)
	}
	if st.RecordLost {
		return st, fmt.Errorf("ingest: %q: its record (seq %d) was lost to a salvage of the damaged log (GET /v1/lost): send the event again", id, st.LostSeq)
	}
	rec, ok, err := s.log.ReadSeq(st.Seq)
	if err != nil {
		return st, fmt.Errorf("ingest: record seq %d of %q: %w", st.Seq, id, err)
	}
	if !ok {
		return st, fmt.Errorf("ingest: record seq %d of %q is gone (past the retention window?)", st.Seq, id)
	}
	now := s.now()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return st, ErrShuttingDown
	}
	if st.Generation != rec.Generation {
		s.mu.Unlock()
		return st, fmt.Errorf("ingest: %q: generation %d is stored, record seq %d has %d", id, st.Generation, st.Seq, rec.Generation)
	}
	st, err = s.tr.Resubmit(now, id, &st, rec.Hash)
	if err != nil {
		s.mu.Unlock()
		return st, err
	}
	delete(s.finished, id)
	s.mu.Unlock()
	nrec := &event.Record{ReceivedAt: now, Hash: rec.Hash, Generation: st.Generation, Event: rec.Event}
	if err := s.log.Append(ctx, nrec); err != nil {
		s.mu.Lock()
		// Back to FAILED_FINAL: the stored documents still say so.
		s.tr.Forget(id)
		s.wakeLocked(id)
		s.mu.Unlock()
		return st, err
	}
	s.counts.event(&nrec.Event, Persisted)
	persistedAt := s.persistedAt(nrec.Seq)
	s.mu.Lock()
	st, _ = s.tr.Persisted(persistedAt, id, nrec.Seq, nrec.Generation)
	s.docs[id] = st
	s.dead[id] = false
	if sl, ok := s.log.(spoutLease); ok {
		if _, held := sl.Holding(); !held {
			// Another serve process's spout runs it: held here, it would stay
			// PERSISTED in this process's answers for good. Its document (next
			// flush) and the log say the rest.
			s.tr.Forget(id)
		}
	}
	s.wakeLocked(id)
	s.mu.Unlock()
	return st, nil
}

// Ready reports whether the service takes events in and processes them: not
// closing, the log healthy, no corruption met in its files (an
// *eventlog.CorruptError naming the file: the log takes no new events until an
// operator deals with it), and the sink (Config.Sink) available.
func (s *Service) Ready() error {
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return ErrShuttingDown
	}
	if err := s.log.Err(); err != nil {
		return err
	}
	if err := s.log.Damaged(); err != nil {
		return err
	}
	return s.sinkErr()
}

// sinkErr is why the sink does not take writes now, nil if it does (or is not known).
func (s *Service) sinkErr() error {
	if s.cfg.Sink == nil {
		return nil
	}
	return s.cfg.Sink.Err()
}

// Stats are the service's gauges.
type Stats struct {
	Held, Waiters, AheadOfOffset int
	Committed, Durable           uint64
	// Steps counts the events' transitions by step since the start (Tracker.Steps).
	Steps map[Step]uint64
	// Flushes counts the flushes done since the start (every FlushEvery, when an
	// answer waits for one, at Close), those with nothing to write included. A
	// count 2 above the one read at some moment means a whole flush began after it.
	Flushes uint64
}

// Stats returns current gauges.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Held: s.tr.Len(), Waiters: len(s.waiters), AheadOfOffset: s.offsets.Ahead(),
		Committed: s.offsets.Committed(), Durable: s.log.Durable(), Steps: s.tr.Steps(), Flushes: s.flushes.Load()}
}

func (s *Service) flusher() {
	defer close(s.stopped)
	t := time.NewTicker(s.cfg.FlushEvery)
	defer t.Stop()
	trim := time.NewTicker(s.cfg.TrimEvery)
	defer trim.Stop()
	for {
		select {
		case <-t.C:
			s.flush()
		case <-s.kick:
			s.flush()
		case <-trim.C:
			if n, err := s.Trim(); err != nil {
				s.cfg.Logger.Error("trim of the log failed", "err", err)
			} else if n > 0 {
				s.cfg.Logger.Info("trimmed finished events past the dedupe window", "events", n, "window", s.cfg.DedupeWindow)
			}
		case <-s.stop:
			s.flush()
			return
		}
	}
}

// flush syncs status documents, dead letters and the committed offset in one
// batch, then forgets the finished events it covered.
func (s *Service) flush() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	defer s.flushes.Add(1)
	s.mu.Lock()
	committed := s.offsets.Committed()
	if sl, ok := s.log.(spoutLease); ok {
		if _, held := sl.Holding(); !held {
			// The offset is the lease holder's to move: this process's would be
			// refused (fenced), at every flush for as long as another holds it.
			committed = 0
		}
	}
	if len(s.docs) == 0 && len(s.dead) == 0 && committed <= s.log.Committed() {
		s.mu.Unlock()
		return
	}
	var w eventlog.Write
	w.Committed = committed
	for id, st := range s.docs {
		b, _ := json.Marshal(st)
		w.Set(eventlog.Status, id, b)
		if set, ok := s.dead[id]; ok && set {
			d, _ := json.Marshal(DeadLetter{EventID: id, Seq: st.Seq, Attempts: st.Attempts, LastError: st.LastError, At: st.Transitions[len(st.Transitions)-1].At})
			w.Set(eventlog.DeadLetter, id, d)
		}
	}
	for id, set := range s.dead {
		if !set {
			w.Delete(eventlog.DeadLetter, id)
		}
	}
	docs, dead := s.docs, s.dead
	s.docs, s.dead = map[string]EventStatus{}, map[string]bool{}
	s.mu.Unlock()

	err := s.log.Apply(&w)

	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		// The log failed (sticky); keep everything in memory for GET. A restart
		// recovers from what is durable and replays the rest.
		for id, st := range docs {
			if _, newer := s.docs[id]; !newer {
				s.docs[id] = st
			}
		}
		for id, v := range dead {
			if _, newer := s.dead[id]; !newer {
				s.dead[id] = v
			}
		}
		s.cfg.Logger.Error("status flush failed; the log is failed, restart to recover", "err", err)
		for id := range docs {
			s.wakeLocked(id) // they answer the status that survives: PERSISTED
		}
		return
	}
	for id, st := range docs {
		_, newer := s.docs[id]
		if s.unsynced[id] && !newer && (st.Status == Processed || st.Status == FailedFinal) {
			// The document written is the final one: answer it now.
			delete(s.unsynced, id)
			s.wakeLocked(id)
		}
		if !s.finished[id] {
			continue
		}
		if _, newer := s.docs[id]; newer {
			continue // changed again since: the next flush decides
		}
		if st, ok := s.tr.Get(id); ok && (st.Status == Processed || st.Status == FailedFinal) {
			if len(s.waiters[id]) > 0 {
				continue // someone still reads it from memory: the next flush forgets it
			}
			s.tr.Forget(id)
		}
		delete(s.finished, id)
	}
}

// Trim forgets finished events received more than DedupeWindow ago (see
// eventlog.Log.Trim); it runs every TrimEvery on its own.
func (s *Service) Trim() (int, error) {
	return s.log.Trim(s.now() - int64(s.cfg.DedupeWindow))
}

// Close stops taking events in (ErrShuttingDown), waits for the submissions under
// way to be answered, gives back the attempts the topology's stop interrupted
// (StepStopped), syncs the statuses and committed offset a last time, and stops the
// flusher. Stop the topology first, so its last outcomes are included. It does not
// close the log.
func (s *Service) Close() error {
	s.Drain()
	s.closeOnce.Do(func() {
		s.inflight.Wait()
		s.giveBackStoppedAttempts() // (stopped.go)
		close(s.stop)
		<-s.stopped
	})
	return s.log.Err()
}

// Drain starts the shutdown: new submissions get ErrShuttingDown (FAILED_RETRYABLE),
// and every answer waiting for a status (ack=processed) is given the status reached
// now instead of waiting on, so a shutdown is not held up by long waits. Call it
// before the HTTP server's Shutdown.
func (s *Service) Drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		s.closing = true
		close(s.draining)
	}
}
