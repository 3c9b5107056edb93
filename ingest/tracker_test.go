package ingest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/gale-stream/gale/event"
)

func h(s string) event.ContentHash { return in("", s).Hash() }

// in is an event with that id and payload, whose content hash is h(payload).
func in(id, payload string) *event.Event {
	return &event.Event{ID: id, Source: "s", Type: "t", Payload: []byte(payload)}
}

func steps(st EventStatus) []Step {
	var out []Step
	for _, tr := range st.Transitions {
		out = append(out, tr.Step)
	}
	return out
}

func eqSteps(a []Step, b ...Step) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Every status transition, in order, with the attempt count and backoff.
func TestTrackerLifecycle(t *testing.T) {
	tr := NewTracker(TrackerConfig{MaxAttempts: 3, BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second})
	v, st := tr.Receive(10, in("e1", `{"a":1}`), h(`{"a":1}`), nil)
	if v != Fresh || st.Status != Accepted {
		t.Fatalf("Receive = %v %v", v, st.Status)
	}
	if v, st := tr.Receive(11, in("e1", `{"a":1}`), h(`{"a":1}`), nil); v != Duplicate || st.Status != Accepted {
		t.Fatalf("same id, same payload while ACCEPTED: %v %v", v, st.Status)
	}
	if v, _ := tr.Receive(12, in("e1", `{"a":2}`), h(`{"a":2}`), nil); v != Conflict {
		t.Fatalf("same id, other payload: %v", v)
	}
	st, _ = tr.Persisted(20, "e1", 7, 0)
	if st.Status != Persisted || st.Seq != 7 {
		t.Fatalf("Persisted: %+v", st)
	}
	for attempt := 1; attempt <= 2; attempt++ {
		n, err := tr.Started(int64(100*attempt), "e1")
		if err != nil || n != attempt {
			t.Fatalf("Started = %d %v", n, err)
		}
		final, retryAt, st, err := tr.Failed(int64(100*attempt+1), "e1", "sink down")
		want := int64(100*attempt+1) + int64(100*time.Millisecond)<<(attempt-1)
		if err != nil || final || retryAt != want || st.Status != Persisted || st.LastError != "sink down" {
			t.Fatalf("Failed #%d = %v %d (want %d) %+v %v", attempt, final, retryAt, want, st, err)
		}
	}
	tr.Started(300, "e1")
	final, _, st, _ := tr.Failed(301, "e1", "sink down for good")
	if !final || st.Status != FailedFinal || st.Attempts != 3 || st.LastError != "sink down for good" {
		t.Fatalf("third failure: final=%v %+v", final, st)
	}
	if !eqSteps(steps(st), StepReceived, StepPersisted, StepStarted, StepFailed, StepStarted, StepFailed, StepStarted, StepDeadLetter) {
		t.Fatalf("steps %v", steps(st))
	}
	if _, err := tr.Started(302, "e1"); err == nil {
		t.Fatal("start of a FAILED_FINAL event accepted")
	}
	// :retry gives a new generation with a fresh budget.
	st, err := tr.Resubmit(400, "e1", nil, h(`{"a":1}`))
	if err != nil || st.Status != Accepted {
		t.Fatalf("Resubmit: %+v %v", st, err)
	}
	tr.Persisted(401, "e1", 9, 1)
	if n, _ := tr.Started(402, "e1"); n != 4 {
		t.Fatalf("attempt after resubmit = %d, want 4", n)
	}
	if _, retryAt, _, _ := tr.Failed(403, "e1", "x"); retryAt != 403+int64(100*time.Millisecond) {
		t.Fatalf("first failure of generation 1 backs off %d", retryAt-403)
	}
	tr.Started(500, "e1")
	st, err = tr.Processed(600, "e1")
	if err != nil || st.Status != Processed || st.Attempts != 5 || st.LastError != "" || st.Generation != 1 {
		t.Fatalf("Processed: %+v %v", st, err)
	}
	if _, err := tr.Processed(601, "e1"); err == nil {
		t.Fatal("second completion accepted")
	}
	if _, err := tr.Resubmit(602, "e1", nil, h(`{"a":1}`)); err == nil {
		t.Fatal("resubmit of a PROCESSED event accepted")
	}
	tr.Forget("e1")
	if tr.Len() != 0 {
		t.Fatal("Forget kept the entry")
	}
}

// NATS #6415: an id whose append failed is not a duplicate; its retry is New.
func TestTrackerFailedAppendDoesNotSwallowRetry(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	tr.Receive(1, in("e", "{}"), h("{}"), nil)
	st := tr.PersistFailed(2, "e", errors.New("fsync: input/output error"))
	if st.Status != FailedRetryable || st.LastError != "fsync: input/output error" {
		t.Fatalf("PersistFailed = %+v", st)
	}
	if v, _ := tr.Receive(3, in("e", "{}"), h("{}"), nil); v != Fresh {
		t.Fatalf("retry after a failed append: %v, want Fresh", v)
	}
}

// The durable index answers for ids no longer held in memory.
func TestTrackerKnownFromIndex(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	known := &EventStatus{EventID: "e", Status: Processed, PayloadHash: h("{}").String()}
	if v, st := tr.Receive(1, in("e", "{}"), h("{}"), known); v != Duplicate || st.Status != Processed {
		t.Fatalf("known same: %v %v", v, st.Status)
	}
	if v, _ := tr.Receive(1, in("e", `{"x":1}`), h(`{"x":1}`), known); v != Conflict {
		t.Fatalf("known other: %v", v)
	}
	if tr.Len() != 0 {
		t.Fatal("a known duplicate was loaded into memory")
	}
}

// After a restart, attempts made before the crash still count toward max attempts.
func TestTrackerLoadKeepsAttempts(t *testing.T) {
	tr := NewTracker(TrackerConfig{MaxAttempts: 3})
	rec := &event.Record{Seq: 4, Hash: h("{}"), Event: event.Event{ID: "e"}, ReceivedAt: 5}
	doc := &EventStatus{EventID: "e", Status: Persisted, Attempts: 2, Transitions: []Transition{
		{Step: StepPersisted, Status: Persisted}, {Step: StepStarted, Attempt: 1}, {Step: StepFailed}, {Step: StepStarted, Attempt: 2}, {Step: StepFailed}}}
	tr.Load(rec, doc, 0)
	if n, _ := tr.Started(10, "e"); n != 3 {
		t.Fatalf("attempt = %d, want 3", n)
	}
	if final, _, _, _ := tr.Failed(11, "e", "boom"); !final {
		t.Fatal("third attempt across a restart was not final")
	}
	st := tr.Load(&event.Record{Seq: 5, Hash: h("{}"), Event: event.Event{ID: "f"}, ReceivedAt: 7}, nil, 0)
	if st.Status != Persisted || st.Transitions[0].At != 7 || st.Seq != 5 {
		t.Fatalf("Load without a doc: %+v", st)
	}
	// The log did not say when it became durable: the receipt time, marked.
	if p := st.Transitions[1]; p.Step != StepPersisted || p.At != 7 || !p.Approximate {
		t.Fatalf("Load without a persisted time: %+v, want the receipt time marked approximate", p)
	}
	st = tr.Load(&event.Record{Seq: 6, Hash: h("{}"), Event: event.Event{ID: "g"}, ReceivedAt: 7}, nil, 9)
	if p := st.Transitions[1]; p.Step != StepPersisted || p.At != 9 || p.Approximate {
		t.Fatalf("Load with a persisted time: %+v, want it at 9", p)
	}
}

func TestOffsetsNeverPassUnfinished(t *testing.T) {
	o := NewOffsets(1)
	for _, seq := range []uint64{2, 3, 5} {
		if c := o.Done(seq); c != 1 {
			t.Fatalf("Done(%d) moved the offset to %d past unfinished 1", seq, c)
		}
	}
	if c := o.Done(1); c != 4 {
		t.Fatalf("Done(1) = %d, want 4", c)
	}
	if c := o.Done(4); c != 6 || o.Ahead() != 0 {
		t.Fatalf("Done(4) = %d ahead %d, want 6 and 0", c, o.Ahead())
	}
	if c := o.Done(2); c != 6 {
		t.Fatalf("a seq done twice moved the offset to %d", c)
	}
}

func TestBackoffCaps(t *testing.T) {
	c := TrackerConfig{BackoffBase: time.Second, BackoffMax: 5 * time.Second}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 40: 5 * time.Second} {
		if got := c.Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// The hand-written batch answer is byte for byte what encoding/json writes.
func TestBatchAnswerEncodingMatchesEncodingJSON(t *testing.T) {
	ba := BatchAnswer{Results: []Answer{
		{Line: 1, EventID: "2010-12-01:1", Status: Persisted, Seq: 12, PayloadHash: "sha256:0123456789abcdef"},
		{Line: 2, EventID: "x", Status: FailedFinal, Error: `line 2: field "type": required <&> é` + "\n"},
		{Line: 3, EventID: "y", Status: Processed, Duplicate: true, Seq: 3, Attempts: 2},
		{Status: FailedRetryable, Error: "overloaded"},
	}, Counts: map[string]int{"PERSISTED": 1, "FAILED_FINAL": 1, "PROCESSED": 1, "FAILED_RETRYABLE": 1}}
	want, err := json.Marshal(ba)
	if err != nil {
		t.Fatal(err)
	}
	if got := ba.appendJSON(nil); string(got) != string(want)+"\n" {
		t.Fatalf("hand-written:\n%s\nencoding/json:\n%s", got, want)
	}
}

// An interrupted attempt (a tree that timed out during a sink outage) is given back:
// it counts toward neither Attempts nor max attempts, also after a restart loads the
// status document.
func TestTrackerInterruptedIsNotCharged(t *testing.T) {
	tr := NewTracker(TrackerConfig{MaxAttempts: 1})
	rec := &event.Record{Seq: 4, Hash: h(`{}`), Event: event.Event{ID: "e"}}
	tr.Load(rec, nil, 0)
	for i := range 3 {
		if n, err := tr.Started(int64(10*i), "e"); err != nil || n != 1 {
			t.Fatalf("Started = %d %v, want attempt 1 each time", n, err)
		}
		st, err := tr.Interrupted(int64(10*i+1), "e", "message timeout; sink unavailable")
		if err != nil || st.Attempts != 0 || st.Status != Persisted || tr.Exhausted("e") {
			t.Fatalf("Interrupted = %+v %v (exhausted %v)", st, err, tr.Exhausted("e"))
		}
	}
	doc, _ := tr.Get("e")
	b, _ := json.Marshal(doc)
	var stored EventStatus
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	after := NewTracker(TrackerConfig{MaxAttempts: 1})
	after.Load(rec, &stored, 0)
	if after.Exhausted("e") {
		t.Fatal("interrupted attempts counted toward max attempts after a restart")
	}
	if n, err := after.Started(100, "e"); err != nil || n != 1 {
		t.Fatalf("Started after a restart = %d %v, want 1", n, err)
	}
	if _, err := after.Interrupted(101, "x", ""); err == nil {
		t.Fatal("interruption of an unknown event accepted")
	}
}

// An event held in memory under the raw-byte hash of the version before (loaded
// from its record) is a duplicate for a byte-identical retry, which the tracker
// hashes again under that rule; other bytes are a conflict.
func TestTrackerRawHashOfOlderRecord(t *testing.T) {
	tr := NewTracker(TrackerConfig{})
	old := in("e", `{"b":1,"a":2}`)
	tr.Load(&event.Record{Seq: 1, Hash: old.HashAs(event.HashRaw), Event: *old}, nil, 0)
	if v, st := tr.Receive(2, old, old.Hash(), nil); v != Duplicate || st.PayloadHash != old.HashAs(event.HashRaw).String() {
		t.Fatalf("byte-identical retry: %v %+v", v, st)
	}
	if v, _ := tr.Receive(2, in("e", `{"a":2,"b":1}`), h(`{"a":2,"b":1}`), nil); v != Conflict {
		t.Fatalf("reordered retry under the raw rule: %v, want Conflict", v)
	}
	// Under the canonical rule (a record of this version), reordered is the same.
	tr.Load(&event.Record{Seq: 2, Hash: h(`{"b":1,"a":2}`), Event: *in("f", `{"b":1,"a":2}`)}, nil, 0)
	if v, _ := tr.Receive(3, in("f", `{"a":2, "b":1}`), h(`{"a":2, "b":1}`), nil); v != Duplicate {
		t.Fatalf("reordered retry under the canonical rule: %v, want Duplicate", v)
	}
}

// Steps counts every transition made, including those of events no longer held.
func TestTrackerSteps(t *testing.T) {
	tr := NewTracker(TrackerConfig{MaxAttempts: 2})
	for _, id := range []string{"ok", "bad"} {
		tr.Receive(1, in(id, `{}`), h(`{}`), nil)
		tr.Persisted(2, id, 1, 0)
	}
	tr.Started(3, "ok")
	tr.Failed(4, "ok", "first try")
	tr.Started(5, "ok")
	tr.Processed(6, "ok")
	for range 2 {
		tr.Started(7, "bad")
		tr.Failed(8, "bad", "always")
	}
	tr.Receive(9, in("lost", `{}`), h(`{}`), nil)
	tr.PersistFailed(10, "lost", errors.New("disk full"))
	// Read back from the log (after a restart, or after it was let go): its rebuilt
	// history is not counted.
	r := &event.Record{Seq: 9, Event: event.Event{ID: "old"}, Hash: h("old"), ReceivedAt: 1}
	tr.Load(r, nil, 0)
	tr.Started(11, "old")
	tr.Steps()[StepReceived] = 100 // a copy
	want := map[Step]uint64{StepReceived: 3, StepPersisted: 2, StepStarted: 5, StepFailed: 3, StepCompleted: 1, StepDeadLetter: 1}
	got := tr.Steps()
	if len(got) != len(want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	for s, n := range want {
		if got[s] != n {
			t.Errorf("%s: %d, want %d (all: %v)", s, got[s], n, got)
		}
	}
}
