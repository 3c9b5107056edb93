package ingest

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/internal/waitfor"
)

// stepOf is the first transition of step in st's history.
func stepOf(t *testing.T, st EventStatus, step Step) Transition {
	t.Helper()
	for _, tr := range st.Transitions {
		if tr.Step == step {
			return tr
		}
	}
	t.Fatalf("%s: no %s step in %+v", st.EventID, step, st.Transitions)
	return Transition{}
}

// checkPersisted checks an event's history: persisted after received, marked
// approximate only if approx, and no later than started if it started. It
// returns the persisted step.
func checkPersisted(t *testing.T, when string, st EventStatus, approx bool) Transition {
	t.Helper()
	rcv, per := stepOf(t, st, StepReceived), stepOf(t, st, StepPersisted)
	switch {
	case approx && (!per.Approximate || per.At != rcv.At):
		t.Fatalf("%s: %s persisted at %d (approximate %v); want its receipt time %d, marked approximate", when, st.EventID, per.At, per.Approximate, rcv.At)
	case !approx && per.Approximate:
		t.Fatalf("%s: %s persisted at %d, marked approximate", when, st.EventID, per.At)
	case !approx && per.At <= rcv.At:
		t.Fatalf("%s: %s persisted at %d, not after it was received at %d", when, st.EventID, per.At, rcv.At)
	}
	for _, tr := range st.Transitions {
		if tr.Step == StepStarted && tr.At < per.At {
			t.Fatalf("%s: %s started at %d, before it was persisted at %d", when, st.EventID, tr.At, per.At)
		}
	}
	return per
}

// An event's history says when it was persisted (issue 25 §4): once it left
// memory its history was rebuilt from the dedupe entry, with the persisted step
// at its receipt time. Now the persisted time is the log's own (the group
// commit's sync), the same before and after a restart; where a kill -9 lost it
// (the newest group's time is written with the next write), the receipt time is
// shown, marked approximate.
func TestHistorySaysWhenPersisted(t *testing.T) {
	fs := vfs.NewCrashableMem()
	health := &fakeSinkHealth{err: errors.New("sink down")}
	r := startRig(t, fs, newSink(nil), Config{Sink: health})
	get := func(r *rig, id string) EventStatus {
		t.Helper()
		code, b := r.get("/v1/events/" + id)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", id, code, b)
		}
		return decode[EventStatus](t, b)
	}
	for _, id := range []string{"a", "b"} { // two group commits
		if code, _, b := r.post("/v1/events?ack=persisted", ev(id, `{}`)); code != 200 {
			t.Fatalf("POST %s: %d %s", id, code, b)
		}
	}
	// The sink is down: nothing is started, so neither is held in memory, and
	// each history is rebuilt from the log.
	persisted := map[string]Transition{}
	for _, id := range []string{"a", "b"} {
		st := get(r, id)
		if st.Status != Persisted {
			t.Fatalf("%s: %+v, want PERSISTED", id, st)
		}
		persisted[id] = checkPersisted(t, "out of memory", st, false)
	}

	// kill -9: a's group's time went with b's group; b's was not written yet.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	rc := startRig(t, crashed, newSink(nil), Config{Sink: &fakeSinkHealth{err: errors.New("sink down")}})
	if p := checkPersisted(t, "after kill -9", get(rc, "a"), false); p.At != persisted["a"].At {
		t.Fatalf("after kill -9: a persisted at %d, was %d", p.At, persisted["a"].At)
	}
	checkPersisted(t, "after kill -9", get(rc, "b"), true)
	rc.stop()

	// The sink is back: both are processed; their histories keep the time.
	health.set(nil)
	for _, id := range []string{"a", "b"} {
		waitfor.True(t, 10*time.Second, id+" processed", func() bool { return get(r, id).Status == Processed })
		st := get(r, id)
		if p := checkPersisted(t, "processed", st, false); p.At != persisted[id].At {
			t.Fatalf("processed: %s persisted at %d, was %d", id, p.At, persisted[id].At)
		}
		stepOf(t, st, StepStarted)
	}
	// One more, left PERSISTED over a graceful restart.
	health.set(errors.New("sink down again"))
	if code, _, b := r.post("/v1/events?ack=persisted", ev("c", `{}`)); code != 200 {
		t.Fatalf("POST c: %d %s", code, b)
	}
	persisted["c"] = checkPersisted(t, "out of memory", get(r, "c"), false)
	r.stop()

	r = startRig(t, fs, newSink(nil), Config{Sink: &fakeSinkHealth{err: errors.New("sink down")}})
	for _, id := range []string{"a", "b", "c"} {
		if p := checkPersisted(t, "after a restart", get(r, id), false); p.At != persisted[id].At {
			t.Fatalf("after a restart: %s persisted at %d, was %d", id, p.At, persisted[id].At)
		}
	}
}
