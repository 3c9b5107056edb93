package ingest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// fakeSinkHealth is a SinkHealth the test switches; it counts how often the spout
// looked (each NextTuple asks).
type fakeSinkHealth struct {
	mu      sync.Mutex
	err     error
	outages uint64
	asked   int
}

func (h *fakeSinkHealth) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked++
	return h.err
}

func (h *fakeSinkHealth) Outages() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.outages
}

func (h *fakeSinkHealth) set(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil && h.err == nil {
		h.outages++
	}
	h.err = err
}

func (h *fakeSinkHealth) askedTimes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.asked
}

// outageBolt is a sink that, for the first execution of each event, calls first
// (e.g. to begin or end an outage) and then holds the input without acking it, so
// its tree times out as one waiting on a sink that is down would; later executions
// are acked.
type outageBolt struct {
	mu    sync.Mutex
	execs map[string]int
	first func(id string)
	out   topology.OutputCollector
}

func (b *outageBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *outageBolt) Cleanup() error { return nil }
func (b *outageBolt) Execute(t *tuple.Tuple) {
	id := t.StringByField("event_id")
	b.mu.Lock()
	b.execs[id]++
	n := b.execs[id]
	b.mu.Unlock()
	if n == 1 {
		b.first(id)
		return
	}
	_ = b.out.Ack(t)
}

func (b *outageBolt) executions(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.execs[id]
}

// A sink outage is not the events' fault. With max attempts 1, so that any charged
// attempt would dead-letter the event:
//   - while the sink is unavailable the spout emits nothing and /readyz is 503
//     naming it;
//   - a tree that times out while the sink is down, or whose life overlapped an
//     outage that is over, is replayed without being charged, once the sink is
//     back, and ends PROCESSED at attempt 1;
//   - a timeout with no outage is still charged (FAILED_FINAL).
func TestSinkOutageChargesNoAttempt(t *testing.T) {
	h := &fakeSinkHealth{}
	down := errors.New("sink unavailable since 12:00: database or disk is full")
	bolt := &outageBolt{execs: map[string]int{}}
	bolt.first = func(id string) {
		switch {
		case strings.HasPrefix(id, "during"):
			h.set(down) // the sink fails as it takes this event, and stays down
		case strings.HasPrefix(id, "across"):
			h.set(down) // a short outage, over before the tree times out
			h.set(nil)
		}
	}
	r := startRigWith(t, vfs.NewMem(), bolt, Config{Sink: h, Tracker: TrackerConfig{MaxAttempts: 1}},
		func(tc *topology.Config) { tc.MessageTimeout = 50 * time.Millisecond })

	// Unavailable from the start: nothing is emitted.
	h.set(down)
	if code, b := r.get("/readyz"); code != 503 || !strings.Contains(string(b), "database or disk is full") {
		t.Fatalf("readyz during the outage: %d %s", code, b)
	}
	if code, _, b := r.post("/v1/events?ack=persisted", ev("early", `{}`)); code != 200 {
		t.Fatalf("post during the outage: %d %s", code, b)
	}
	// The spout looks many times and emits nothing (or, the fault, emits it).
	from := h.askedTimes()
	waitfor.True(t, 10*time.Second, "the spout to look 100 times", func() bool { return h.askedTimes() >= from+100 || bolt.executions("early") > 0 })
	if n := bolt.executions("early"); n != 0 {
		t.Fatalf("the spout emitted %q %d times while the sink was unavailable", "early", n)
	}
	h.set(nil)
	// early's first execution holds it (first is a no-op for it): it times out
	// with no outage, and is charged: FAILED_FINAL at max attempts 1.
	waitfor.True(t, 10*time.Second, "early to end", func() bool {
		st, err := r.svc.Status("early")
		return err == nil && st.Status == FailedFinal
	})

	// Down as the sink takes the event: the timeout is not charged.
	if code, _, b := r.post("/v1/events?ack=persisted", ev("during", `{}`)); code != 200 {
		t.Fatalf("post: %d %s", code, b)
	}
	waitfor.True(t, 10*time.Second, "during's attempt to end", func() bool {
		st, err := r.svc.Status("during")
		if err != nil || len(st.Transitions) == 0 {
			return false
		}
		last := st.Transitions[len(st.Transitions)-1].Step
		return last == StepInterrupted || last == StepDeadLetter || last == StepFailed
	})
	st, _ := r.svc.Status("during")
	if st.Status != Persisted || st.Attempts != 0 {
		t.Fatalf("during, interrupted: %s after %d attempts, want PERSISTED after 0", st.Status, st.Attempts)
	}
	if tr := st.Transitions[len(st.Transitions)-1]; !strings.Contains(tr.Error, "message timeout") || !strings.Contains(tr.Error, "not charged") || !strings.Contains(tr.Error, "disk is full") {
		t.Fatalf("interrupted transition %+v does not say why", tr)
	}
	from = h.askedTimes()
	waitfor.True(t, 10*time.Second, "the spout to look 100 times", func() bool { return h.askedTimes() >= from+100 || bolt.executions("during") > 1 })
	if n := bolt.executions("during"); n != 1 {
		t.Fatalf("during executed %d times while the sink was down, want 1", n)
	}
	h.set(nil)
	for _, id := range []string{"during", "across"} {
		if id == "across" {
			if code, _, b := r.post("/v1/events?ack=persisted", ev("across", `{}`)); code != 200 {
				t.Fatalf("post: %d %s", code, b)
			}
		}
		code, _, b := r.post("/v1/events?ack=processed&wait=20s", ev(id, `{}`))
		a := decode[Answer](t, b)
		if code != 200 || a.Status != Processed || a.Attempts != 1 {
			t.Fatalf("%s after the outage: %d %s, want PROCESSED at attempt 1", id, code, b)
		}
		st, _ := r.svc.Status(id)
		var steps []string
		for _, tr := range st.Transitions {
			steps = append(steps, string(tr.Step))
		}
		if want := "received,persisted,started,interrupted,started,completed"; strings.Join(steps, ",") != want {
			t.Errorf("%s's history %v, want %s", id, steps, want)
		}
	}
	if code, b := r.get("/readyz"); code != 200 {
		t.Fatalf("readyz after the outage: %d %s", code, b)
	}
}
