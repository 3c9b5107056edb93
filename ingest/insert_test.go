package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
)

// rigLog is the Log a rig's Service runs on, made from the rig's Pebble log.
var rigLog = func(l *eventlog.Log) Log { return l }

var errIDStored = errors.New("fake: the event id is stored already")

// insertingLog makes the Pebble log an insertLog, as jslog is: SubmitEach refuses a
// record whose id is stored (or being submitted) with errIDStored, writing nothing,
// and answers each record on its own. It counts the Service's Lookups; failing
// fails the next records with that error instead; while hold is set, done waits
// until it is closed.
type insertingLog struct {
	*eventlog.Log
	mu      sync.Mutex
	pending map[string]bool
	lookups atomic.Int64
	failing atomic.Pointer[error]
	hold    chan struct{}
}

func inserting(l *eventlog.Log) *insertingLog {
	return &insertingLog{Log: l, pending: map[string]bool{}}
}

func (l *insertingLog) Lookup(id string) (eventlog.Entry, bool, error) {
	l.lookups.Add(1)
	return l.Log.Lookup(id)
}

func (l *insertingLog) Exists(err error) bool { return errors.Is(err, errIDStored) }

func (l *insertingLog) SubmitEach(recs []*event.Record, done func([]error)) error {
	errs := make([]error, len(recs))
	var take []*event.Record
	var at []int
	l.mu.Lock()
	for i, r := range recs {
		if p := l.failing.Load(); p != nil {
			errs[i] = *p
			continue
		}
		_, ok, err := l.Log.Lookup(r.Event.ID)
		switch {
		case err != nil:
			errs[i] = err
		case ok || l.pending[r.Event.ID]:
			errs[i] = fmt.Errorf("%w: %q", errIDStored, r.Event.ID)
		default:
			l.pending[r.Event.ID] = true
			take, at = append(take, r), append(at, i)
		}
	}
	l.mu.Unlock()
	finish := func(err error) {
		l.mu.Lock()
		for _, r := range take {
			delete(l.pending, r.Event.ID) // durable (Lookup finds it) or failed
		}
		l.mu.Unlock()
		for _, i := range at {
			errs[i] = err
		}
		go func() {
			if l.hold != nil {
				<-l.hold
			}
			done(errs)
		}()
	}
	if len(take) == 0 {
		finish(nil)
		return nil
	}
	return l.Log.Submit(take, finish)
}

// The behaviour suite of the rig, on a log whose publish is the dedupe: every
// answer, status, count and sink effect is the Pebble log's, though new events
// are no longer looked up first.
func TestRigSuiteOnAnInsertLog(t *testing.T) {
	defer func(f func(*eventlog.Log) Log) { rigLog = f }(rigLog)
	rigLog = func(l *eventlog.Log) Log { return inserting(l) }
	for name, test := range map[string]func(*testing.T){
		"EveryAckLevelAndTheHistory":                    TestEveryAckLevelAndTheHistory,
		"RetryAfterLostResponseIsADuplicate":            TestRetryAfterLostResponseIsADuplicate,
		"RetriesWithBackoffThenDeadLetterThenResubmit":  TestRetriesWithBackoffThenDeadLetterThenResubmit,
		"BatchKeepsGoodLinesAroundABadOne":              TestBatchKeepsGoodLinesAroundABadOne,
		"ConcurrentDuplicatesAppendOnce":                TestConcurrentDuplicatesAppendOnce,
		"AcceptedOnlyWhenTheLogTookIt":                  TestAcceptedOnlyWhenTheLogTookIt,
		"SourceDefaultLevels":                           TestSourceDefaultLevels,
		"DedupeWindowTrim":                              TestDedupeWindowTrim,
		"CountsByStatusSourceAndLevel":                  TestCountsByStatusSourceAndLevel,
		"ProcessedAfterARetryIsAnsweredOnlyWhenDurable": TestProcessedAfterARetryIsAnsweredOnlyWhenDurable,
	} {
		t.Run(name, test)
	}
}

// newInsertService is a Service without a topology on an insertingLog over a fresh
// Pebble log.
func newInsertService(t *testing.T) (*Service, *insertingLog) {
	t.Helper()
	pl, err := eventlog.Open(eventlog.Options{Dir: "data", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	l := inserting(pl)
	svc, err := New(Config{Log: l, Logger: quiet(), FlushEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = svc.Close()
		_ = pl.Close()
	})
	return svc, l
}

func orderEvent(id, payload string) event.Event {
	return event.Event{ID: id, Source: "orders", Type: "order_line", Payload: []byte(payload)}
}

func (s *Service) held(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tr.Has(id)
}

// New events on an insertLog are published without a Lookup; a resend whose first
// answer was lost is refused by the log, looked up once and answered the
// duplicate; an id stored by another process with other content is a conflict,
// with the same content a duplicate. Nothing is stored twice, and the counts and
// steps count only the new events (the refused ones as duplicates).
func TestInsertLogPublishesFirstAndLooksUpOnlyARefusal(t *testing.T) {
	svc, l := newInsertService(t)
	ctx := context.Background()
	var evs []event.Event
	for i := range 5 {
		evs = append(evs, orderEvent(fmt.Sprintf("n%d", i), fmt.Sprintf(`{"n":%d}`, i)))
	}
	for i, r := range svc.Submit(ctx, evs, LevelPersisted, 0) {
		if r.Err != nil || r.Duplicate || r.Status.Status != Persisted || r.Status.Seq != uint64(i+1) {
			t.Fatalf("new event %d: %+v", i, r)
		}
	}
	if n := l.lookups.Load(); n != 0 {
		t.Fatalf("%d lookups for new events, want 0", n)
	}
	if svc.held("n2") {
		t.Fatal("n2 still held once PERSISTED (no spout): the resend would not reach the log")
	}
	// The answer of n2 was lost; the client sends it again (and in a batch with a new one).
	again := svc.Submit(ctx, []event.Event{orderEvent("n2", `{"n":2}`), orderEvent("n5", `{"n":5}`)}, LevelPersisted, 0)
	if r := again[0]; r.Err != nil || !r.Duplicate || r.Status.Status != Persisted || r.Status.Seq != 3 {
		t.Fatalf("resend of n2: %+v", r)
	}
	if r := again[1]; r.Err != nil || r.Duplicate || r.Status.Status != Persisted || r.Status.Seq != 6 {
		t.Fatalf("n5 beside the resend: %+v", r)
	}
	if n := l.lookups.Load(); n < 1 {
		t.Fatalf("%d lookups after a refused resend, want at least 1", n)
	}
	// Another serve process stored x (payload Q) meanwhile.
	x := &event.Record{ReceivedAt: time.Now().UnixNano(), Event: orderEvent("x", `{"q":1}`)}
	x.Hash = x.Event.Hash()
	if err := l.Log.Append(ctx, x); err != nil || x.Seq != 7 {
		t.Fatalf("x: seq %d, %v", x.Seq, err)
	}
	r := svc.Submit(ctx, []event.Event{orderEvent("x", `{"p":1}`)}, LevelPersisted, 0)[0]
	if !errors.Is(r.Err, ErrConflict) || r.Duplicate || r.Status.Seq != 7 || r.Status.PayloadHash != x.Hash.String() {
		t.Fatalf("x with other content: %+v, want a conflict with the stored x at seq 7", r)
	}
	r = svc.Submit(ctx, []event.Event{orderEvent("x", `{"q":1}`)}, LevelProcessed, 100*time.Millisecond)[0]
	if r.Err != nil || !r.Duplicate || r.Status.Status != Persisted || r.Status.Seq != 7 {
		t.Fatalf("x with the same content at ack=processed, nothing processing it: %+v", r)
	}
	if l.Durable() != 7 || svc.held("x") {
		t.Fatalf("durable %d (want 7: nothing stored twice), x held %v", l.Durable(), svc.held("x"))
	}
	c := svc.Counts()
	if got := c.Events["orders"].ByStatus; got[Accepted] != 6 || got[Persisted] != 6 || got[FailedRetryable] != 0 {
		t.Errorf("orders counted %v, want 6 ACCEPTED and 6 PERSISTED (the new events only)", got)
	}
	if c.Duplicates != 2 {
		t.Errorf("duplicates = %d, want 2 (n2, x)", c.Duplicates)
	}
	if st := svc.Stats().Steps; st[StepReceived] != 6 || st[StepPersisted] != 6 || st[StepFailed] != 0 {
		t.Errorf("steps %v, want 6 received and 6 persisted", st)
	}
	// A new event the log fails (not a refusal) is FAILED_RETRYABLE and counted as
	// before: taken in, then failed; its resend is new.
	boom := errors.New("boom")
	l.failing.Store(&boom)
	r = svc.Submit(ctx, []event.Event{orderEvent("f", `{}`)}, LevelPersisted, 0)[0]
	if !errors.Is(r.Err, boom) || r.Status.Status != FailedRetryable {
		t.Fatalf("f on a failing log: %+v", r)
	}
	l.failing.Store(nil)
	if r = svc.Submit(ctx, []event.Event{orderEvent("f", `{}`)}, LevelPersisted, 0)[0]; r.Err != nil || r.Duplicate || r.Status.Seq != 8 {
		t.Fatalf("f again: %+v", r)
	}
	if got := svc.Counts().Events["orders"].ByStatus; got[Accepted] != 8 || got[Persisted] != 7 || got[FailedRetryable] != 1 {
		t.Errorf("orders counted %v, want 8 ACCEPTED, 7 PERSISTED, 1 FAILED_RETRYABLE", got)
	}
	if st := svc.Stats().Steps; st[StepReceived] != 8 || st[StepFailed] != 1 {
		t.Errorf("steps %v, want 8 received, 1 failed", st)
	}
}

// Two copies of an id in flight at once, the id stored already by another
// process: the first is refused by the log, the second waits on the first's
// entry. Both answers agree with the stored record: two conflicts for other
// content, two duplicates of it for the same.
func TestInsertLogConcurrentCopiesOfAStoredID(t *testing.T) {
	for _, tc := range []struct {
		name, payload string
		conflict      bool
	}{{"other content", `{"p":1}`, true}, {"same content", `{"q":1}`, false}} {
		t.Run(tc.name, func(t *testing.T) {
			svc, l := newInsertService(t)
			ctx := context.Background()
			x := &event.Record{ReceivedAt: time.Now().UnixNano(), Event: orderEvent("x", `{"q":1}`)}
			x.Hash = x.Event.Hash()
			if err := l.Log.Append(ctx, x); err != nil {
				t.Fatal(err)
			}
			l.hold = make(chan struct{})
			res := make(chan Result, 2)
			send := func() { res <- svc.Submit(ctx, []event.Event{orderEvent("x", tc.payload)}, LevelPersisted, 0)[0] }
			go send()
			waitfor.True(t, 10*time.Second, "the first copy held", func() bool { return svc.held("x") })
			go send()
			waitfor.True(t, 10*time.Second, "the second copy waiting on the first", func() bool { return svc.Stats().Waiters == 1 })
			close(l.hold)
			for range 2 {
				r := <-res
				if r.Status.Seq != 1 || r.Status.PayloadHash != x.Hash.String() {
					t.Errorf("answer %+v, want the stored x (seq 1)", r)
				}
				if tc.conflict && (!errors.Is(r.Err, ErrConflict) || r.Duplicate) {
					t.Errorf("answer %+v, want a conflict", r)
				}
				if !tc.conflict && (r.Err != nil || !r.Duplicate || r.Status.Status != Persisted) {
					t.Errorf("answer %+v, want a PERSISTED duplicate", r)
				}
			}
			if l.Durable() != 1 || svc.held("x") || svc.Stats().Waiters != 0 {
				t.Errorf("durable %d (want 1), x held %v, %d waiters", l.Durable(), svc.held("x"), svc.Stats().Waiters)
			}
			c := svc.Counts()
			if got := c.Events["orders"].ByStatus; got[Accepted] != 0 || got[Persisted] != 0 {
				t.Errorf("orders counted %v, want nothing new", got)
			}
			if want := map[bool]uint64{true: 0, false: 2}[tc.conflict]; c.Duplicates != want {
				t.Errorf("duplicates = %d, want %d", c.Duplicates, want)
			}
			if st := svc.Stats().Steps; st[StepReceived] != 0 {
				t.Errorf("steps %v, want none received", st)
			}
		})
	}
}

// An ack=processed resend of an event stored and not yet processed (out of
// memory, waiting for the spout): refused by the log, it waits as a duplicate for
// the existing event's processing and answers PROCESSED once it is done, the sink
// applying it once.
func TestInsertLogProcessedResendWaitsForTheStoredEvent(t *testing.T) {
	svc, l := newInsertService(t)
	ctx := context.Background()
	if r := svc.Submit(ctx, []event.Event{orderEvent("e", `{}`)}, LevelPersisted, 0)[0]; r.Err != nil || r.Status.Seq != 1 {
		t.Fatalf("e: %+v", r)
	}
	res := make(chan Result, 1)
	go func() {
		res <- svc.Submit(ctx, []event.Event{orderEvent("e", `{}`)}, LevelProcessed, 20*time.Second)[0]
	}()
	waitfor.True(t, 10*time.Second, "the resend waiting", func() bool { return l.lookups.Load() > 0 && svc.Stats().Waiters == 1 })
	select {
	case r := <-res:
		t.Fatalf("answered before anything processed e: %+v", r)
	default:
	}
	sink := newSink(nil)
	b := topology.NewBuilder()
	b.SetSpout("log", svc.Spout(), 1).Output(SpoutFields...)
	b.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("log")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	tc := topology.DefaultConfig()
	tc.Logger = quiet()
	rt, err := engine.Start(ctx, topo, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Stop(ctx); <-rt.Done() }()
	r := <-res
	if r.Err != nil || !r.Duplicate || r.Status.Status != Processed || r.Status.Seq != 1 {
		t.Fatalf("the resend: %+v, want a PROCESSED duplicate at seq 1", r)
	}
	if applied, execs := sink.count("e"); applied != 1 || execs != 1 || l.Durable() != 1 {
		t.Fatalf("sink applied %d, executed %d; durable %d", applied, execs, l.Durable())
	}
}

// Only answers that wait for the log go unlooked-up: an ack=accepted resend of a
// stored id is looked up first and answered the duplicate, never ACCEPTED as new.
func TestInsertLogAcceptedIsLookedUpFirst(t *testing.T) {
	svc, l := newInsertService(t)
	ctx := context.Background()
	if r := svc.Submit(ctx, []event.Event{orderEvent("a", `{}`)}, LevelPersisted, 0)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	r := svc.Submit(ctx, []event.Event{orderEvent("a", `{"other":1}`)}, LevelAccepted, 0)[0]
	if !errors.Is(r.Err, ErrConflict) || l.lookups.Load() == 0 {
		t.Fatalf("ack=accepted with other content: %+v (%d lookups), want a conflict", r, l.lookups.Load())
	}
	if r = svc.Submit(ctx, []event.Event{orderEvent("a", `{}`)}, LevelAccepted, 0)[0]; r.Err != nil || !r.Duplicate || r.Status.Status != Persisted {
		t.Fatalf("ack=accepted resend: %+v, want a PERSISTED duplicate", r)
	}
	if svc.Counts().Duplicates != 1 || l.Durable() != 1 {
		t.Fatalf("duplicates %d, durable %d", svc.Counts().Duplicates, l.Durable())
	}
}

// A tentative receipt (ReceiveTentative) is counted in Steps once the log takes
// or fails the event, never when the log refuses it as stored already (Refused
// drops it), and Refused leaves an entry the log's reader took meanwhile.
func TestTrackerTentativeReceipts(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	ev := func(id string) *event.Event { e := orderEvent(id, `{}`); return &e }
	recv := func(id string) {
		t.Helper()
		e := ev(id)
		if v, st := tr.ReceiveTentative(1, e, e.Hash()); v != Fresh || st.Status != Accepted {
			t.Fatalf("%s: %v %+v", id, v, st)
		}
	}
	recv("a")
	if n := tr.Steps()[StepReceived]; n != 0 || !tr.Has("a") {
		t.Fatalf("received %d, a held %v: want 0, held", n, tr.Has("a"))
	}
	e := ev("a")
	if v, _ := tr.ReceiveTentative(2, e, e.Hash()); v != Duplicate {
		t.Fatalf("a again while held: %v", v)
	}
	if _, ok := tr.Persisted(3, "a", 1, 0); !ok || tr.Steps()[StepReceived] != 1 || tr.Refused("a") {
		t.Fatalf("a persisted: received %d, Refused dropped it", tr.Steps()[StepReceived])
	}
	recv("b")
	if !tr.Refused("b") || tr.Has("b") || tr.Steps()[StepReceived] != 1 {
		t.Fatalf("b refused: held %v, received %d", tr.Has("b"), tr.Steps()[StepReceived])
	}
	recv("c")
	tr.PersistFailed(4, "c", errors.New("boom"))
	if s := tr.Steps(); s[StepReceived] != 2 || s[StepFailed] != 1 || tr.Has("c") {
		t.Fatalf("c failed: steps %v, held %v", s, tr.Has("c"))
	}
	if tr.Refused("nope") {
		t.Fatal("Refused of an unknown id")
	}
	d := ev("d") // received as before: counted at once, never Refused
	tr.Receive(5, d, d.Hash(), nil)
	if tr.Steps()[StepReceived] != 3 || tr.Refused("d") || !tr.Has("d") {
		t.Fatalf("d: received %d, held %v", tr.Steps()[StepReceived], tr.Has("d"))
	}
}
