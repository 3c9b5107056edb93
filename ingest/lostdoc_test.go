package ingest

import (
	"encoding/json"
	"testing"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
)

// A status document is about one record: its seq. After a salvage of a
// JetStream log the documents of lost records survive them, and a resend of
// such an id is stored at a new seq, of the same generation. The document of
// the lost record must then not pass for the new one's: not make the log spout
// skip it as finished, not be loaded as its history, and not keep the new
// record's unfinished statuses from being written over it.
func TestADocumentIsAboutItsSeq(t *testing.T) {
	rec := &event.Record{Seq: 9, Event: event.Event{ID: "o3"}}
	for _, st := range []Status{Processed, FailedFinal} {
		lost := durableView{entry: eventlog.Entry{Seq: 9}, inIdx: true, doc: &EventStatus{EventID: "o3", Status: st, Seq: 4}}
		if lost.done(rec) {
			t.Errorf("a %s document about seq 4 makes the record at seq 9 done", st)
		}
		own := durableView{entry: eventlog.Entry{Seq: 9}, inIdx: true, doc: &EventStatus{EventID: "o3", Status: st, Seq: 9}}
		if !own.done(rec) {
			t.Errorf("a %s document about seq 9 does not make the record at seq 9 done", st)
		}
	}

	tr := NewTracker(TrackerConfig{MaxAttempts: 1})
	doc := &EventStatus{EventID: "o3", Status: FailedFinal, Seq: 4, Attempts: 1,
		Transitions: []Transition{{Step: StepReceived, Status: Accepted}, {Step: StepPersisted, Status: Persisted},
			{Step: StepStarted, Attempt: 1}, {Step: StepDeadLetter, Status: FailedFinal, Attempt: 1}}}
	if st := tr.Load(rec, doc, 1); st.Status != Persisted || st.Seq != 9 || st.Attempts != 0 || len(st.Transitions) != 2 {
		t.Fatalf("the record at seq 9 loaded with the document of seq 4: %+v; want PERSISTED at seq 9, a history of its own", st)
	}
	if _, err := tr.Started(2, "o3"); err != nil {
		t.Fatalf("the record at seq 9 cannot start: %v", err)
	}

	enc := func(st EventStatus) []byte { b, _ := json.Marshal(st); return b }
	stored := enc(EventStatus{Status: FailedFinal, Seq: 4})
	if !statusReplaces(stored, enc(EventStatus{Status: Persisted, Seq: 9})) {
		t.Error("the new record's PERSISTED document (seq 9) may not replace the lost one's FAILED_FINAL (seq 4)")
	}
	if statusReplaces(enc(EventStatus{Status: Processed, Seq: 9}), enc(EventStatus{Status: Persisted, Seq: 4})) {
		t.Error("a stale writer's document of seq 4 replaces the PROCESSED one of seq 9")
	}
	if statusReplaces(enc(EventStatus{Status: Processed, Seq: 9}), enc(EventStatus{Status: Persisted, Seq: 9})) {
		t.Error("a stale writer's PERSISTED replaces PROCESSED of the same record")
	}
}
