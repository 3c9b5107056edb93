package jslog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ctlSink acks every input but those of the ids in hold: for one of them it
// signals got, then waits for a verdict (nil: ack, else fail with it).
type ctlSink struct {
	out  topology.OutputCollector
	mu   sync.Mutex
	seen map[string]int
	hold map[string]chan error
	got  chan string
}

func newCtlSink(hold ...string) *ctlSink {
	s := &ctlSink{seen: map[string]int{}, hold: map[string]chan error{}, got: make(chan string, 16)}
	for _, id := range hold {
		s.hold[id] = make(chan error, 1)
	}
	return s
}

func (b *ctlSink) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *ctlSink) Cleanup() error { return nil }
func (b *ctlSink) Execute(in *tuple.Tuple) {
	id := in.StringByField("event_id")
	b.mu.Lock()
	b.seen[id]++
	ch := b.hold[id]
	b.mu.Unlock()
	if ch != nil {
		b.got <- id
		select {
		case err := <-ch:
			if err != nil {
				_ = b.out.FailWith(in, err)
				return
			}
		case <-time.After(20 * time.Second): // never hang a test
		}
	}
	_ = b.out.Ack(in)
}

func (b *ctlSink) count(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[id]
}

// startServeWith is startServe with a sink and a service config of the test's.
func startServeWith(t *testing.T, l *Log, cfg ingest.Config, sink topology.Bolt) (*ingest.Service, *engine.Runtime) {
	t.Helper()
	cfg.Log = l
	svc, err := ingest.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("log", svc.Spout(), 1).Output(ingest.SpoutFields...)
	b.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("log")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, topology.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = rt.Stop(context.Background())
		_ = svc.Close()
	})
	return svc, rt
}

// storedStatus is the status document of id as stored in the bucket.
func storedStatus(t *testing.T, l *Log, id string) *ingest.EventStatus {
	t.Helper()
	b, ok, err := l.Get(eventlog.Status, id)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	var st ingest.EventStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// waitStored waits, bounded, until id's stored status is want.
func waitStored(t *testing.T, l *Log, id string, want ingest.Status, within time.Duration) {
	t.Helper()
	waitfor.Until(t, within, func() error {
		if st := storedStatus(t, l, id); st == nil || st.Status != want {
			return fmt.Errorf("%s's stored status: %+v, want %s", id, st, want)
		}
		return nil
	})
}

// waitCommitted waits, bounded, until svc's committed offset is want (why says
// what it is past).
func waitCommitted(t *testing.T, svc *ingest.Service, want uint64, why string) {
	t.Helper()
	waitfor.Until(t, 10*time.Second, func() error {
		if c := svc.Stats().Committed; c != want {
			return fmt.Errorf("committed offset %d, want %d (%s)", c, want, why)
		}
		return nil
	})
}

// A holder loses the lease with a tree in flight (a slow sink); the other takes
// over, replays the event and processes it. Then the old tree fails (or times
// out) in the deposed holder: its outcome must not overwrite the PROCESSED the
// new holder stored, or the event is stuck: the new holder's offset is past it,
// and its status says PERSISTED (with an error) for ever.
func TestDeposedHolderStaleFailure(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	la := openLeased(t, url, "a")
	lb := openLeased(t, url, "b")
	sa := newCtlSink("o0")
	a, rta := startServeWith(t, la, ingest.Config{FlushEvery: 5 * time.Millisecond}, sa)
	sb := newCtlSink()
	b, _ := startServeWith(t, lb, ingest.Config{FlushEvery: 5 * time.Millisecond}, sb)
	ctx := context.Background()
	if r := a.Submit(ctx, orderEvents(0, 1), ingest.LevelPersisted, 0)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	select {
	case <-sa.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a's sink never got o0")
	}
	la.lease.paused.Store(true) // a stalls: its lease lapses, b takes over
	waitHolding(t, lb, 15*time.Second)
	waitStored(t, lb, "o0", ingest.Processed, 15*time.Second)
	if n := sb.count("o0"); n != 1 {
		t.Fatalf("b's sink saw o0 %d times, want 1", n)
	}
	sa.hold["o0"] <- errors.New("the sink timed out") // the old tree ends, failed
	// Once a's spout has had the failure, a stops: its stop flushes whatever it
	// recorded, so the stored status below is final.
	waitfor.True(t, 10*time.Second, "a's spout to have o0's failure", func() bool { return rta.Stats().Components["log"].Failed > 0 })
	_ = rta.Stop(ctx)
	_ = a.Close()
	if st := storedStatus(t, lb, "o0"); st == nil || st.Status != ingest.Processed {
		t.Fatalf("o0's stored status after the deposed holder's tree failed: %+v, want PROCESSED (b processed it)", st)
	}
	r := b.Submit(ctx, orderEvents(0, 1), ingest.LevelProcessed, 3*time.Second)[0]
	if r.Err != nil || !r.Duplicate || r.Status.Status != ingest.Processed {
		t.Fatalf("resend of o0 to b: %+v", r)
	}
}

// A holder's flush is late (its connection was down, the process paused): the
// documents it wrote while holding land after another process took over and
// finished the event. A non-final status must not replace a final one of the
// same generation: the event would show PERSISTED for ever, no one left to
// process it.
func TestDeposedHolderLateFlush(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	la := openLeased(t, url, "a")
	lb := openLeased(t, url, "b")
	sa := newCtlSink("o0")
	// a flushes only when it stops: the stand-in for a flush that fails until
	// the deposed holder's connection is back. Its retry is far off.
	a, rta := startServeWith(t, la, ingest.Config{FlushEvery: time.Hour,
		Tracker: ingest.TrackerConfig{BackoffBase: time.Hour, BackoffMax: time.Hour}}, sa)
	sb := newCtlSink()
	startServeWith(t, lb, ingest.Config{FlushEvery: 5 * time.Millisecond}, sb)
	ctx := context.Background()
	if r := a.Submit(ctx, orderEvents(0, 1), ingest.LevelPersisted, 0)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	select {
	case <-sa.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a's sink never got o0")
	}
	sa.hold["o0"] <- errors.New("the sink said no") // failed while a holds: a retry in an hour
	waitfor.True(t, 10*time.Second, "a to record o0's failure", func() bool { return a.Stats().Steps[ingest.StepFailed] > 0 })
	la.lease.paused.Store(true)
	waitHolding(t, lb, 15*time.Second)
	waitStored(t, lb, "o0", ingest.Processed, 15*time.Second)
	// a's late flush.
	_ = rta.Stop(ctx)
	_ = a.Close()
	if st := storedStatus(t, lb, "o0"); st == nil || st.Status != ingest.Processed {
		t.Fatalf("o0's stored status after the deposed holder's late flush: %+v, want PROCESSED (b processed it)", st)
	}
}

// The old tree's failure is the deposed holder's last attempt: it must not
// dead-letter an event the new holder processed (FAILED_FINAL over PROCESSED,
// and a dead letter listed for it), nor charge an attempt the new holder
// charges again at its takeover.
func TestDeposedHolderStaleDeadLetter(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	la := openLeased(t, url, "a")
	lb := openLeased(t, url, "b")
	sa := newCtlSink("o0")
	a, rta := startServeWith(t, la, ingest.Config{FlushEvery: 5 * time.Millisecond,
		Tracker: ingest.TrackerConfig{MaxAttempts: 1}}, sa)
	sb := newCtlSink()
	b, _ := startServeWith(t, lb, ingest.Config{FlushEvery: 5 * time.Millisecond}, sb)
	ctx := context.Background()
	if r := a.Submit(ctx, orderEvents(0, 1), ingest.LevelPersisted, 0)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	select {
	case <-sa.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a's sink never got o0")
	}
	la.lease.paused.Store(true)
	waitHolding(t, lb, 15*time.Second)
	waitStored(t, lb, "o0", ingest.Processed, 15*time.Second)
	sa.hold["o0"] <- errors.New("the sink timed out")
	// a's spout heard of it and let the event go.
	waitfor.True(t, 10*time.Second, "a to let o0 go", func() bool { return a.Stats().Held == 0 })
	_ = rta.Stop(ctx) // a's stop flushes whatever it recorded
	_ = a.Close()
	st := storedStatus(t, lb, "o0")
	if st == nil || st.Status != ingest.Processed || st.Attempts != 1 {
		t.Fatalf("o0's stored status after the deposed holder's tree failed: %+v, want PROCESSED after 1 attempt (b's)", st)
	}
	if _, dead, err := lb.Get(eventlog.DeadLetter, "o0"); err != nil || dead {
		t.Fatalf("o0 dead-lettered (%v, %v) though b processed it", dead, err)
	}
	if dl, err := b.DeadLetters(10); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters: %+v %v", dl, err)
	}
}

// countHandler counts the records logged whose message contains sub.
type countHandler struct {
	sub string
	n   *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.sub) {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// A deposed holder whose offset moved on after it lost the lease (a tree of its
// term finished) does not try to write it at every flush: each try was refused
// (not holding), logged as a warning and counted as fenced, 200 times a second
// here (a flush every 5ms), for as long as another process holds the lease.
func TestDeposedHolderNoFenceStorm(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	var warned atomic.Int64
	la, err := Open(context.Background(), Config{JS: openJS(t, url), Prefix: "t", Timeout: 5 * time.Second,
		Holder: "a", LeaseTTL: time.Second, Logger: slog.New(countHandler{sub: "committed offset not moved", n: &warned})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = la.Close() })
	lb := openLeased(t, url, "b")
	sa := newCtlSink("o0")
	a, _ := startServeWith(t, la, ingest.Config{FlushEvery: 5 * time.Millisecond}, sa)
	startServeWith(t, lb, ingest.Config{FlushEvery: 5 * time.Millisecond}, newCtlSink())
	ctx := context.Background()
	if r := a.Submit(ctx, orderEvents(0, 1), ingest.LevelPersisted, 0)[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	select {
	case <-sa.got:
	case <-time.After(10 * time.Second):
		t.Fatal("a's sink never got o0")
	}
	la.lease.paused.Store(true)
	waitHolding(t, lb, 15*time.Second)
	waitStored(t, lb, "o0", ingest.Processed, 15*time.Second)
	sa.hold["o0"] <- nil // a's old tree completes: a's offset moves past o0
	waitfor.Until(t, 10*time.Second, func() error {
		if c := a.Stats().Committed; c < 2 {
			return fmt.Errorf("a's offset %d, want 2", c)
		}
		return nil
	})
	// Each flush of a would try to write its offset: let 100 of them run (half a
	// second at a flush every 5 ms).
	const flushes = 100
	from := a.Stats().Flushes
	waitfor.True(t, 30*time.Second, fmt.Sprint(flushes, " more flushes of a"), func() bool { return a.Stats().Flushes >= from+flushes })
	if n, f := warned.Load(), la.Fenced(); n > 2 || f > 2 {
		t.Fatalf("in %d flushes, the deposed holder logged %d warnings of an offset not moved and counted %d fenced writes; want at most 2", flushes, n, f)
	}
}

// A dead letter resubmitted (POST /v1/events/{id}:retry) through a serve
// process that does not hold the lease: the holder processes the new
// generation, and the process it went through must answer PROCESSED, not the
// PERSISTED it kept in memory (no spout of its own will ever move it on).
func TestResubmitThroughANonHolder(t *testing.T) {
	url := natstest.Run(t, natstest.JetStream(t, "")).ClientURL()
	la := openLeased(t, url, "a")
	lb := openLeased(t, url, "b")
	sa := newCtlSink("o0")
	startServeWith(t, la, ingest.Config{FlushEvery: 5 * time.Millisecond, Tracker: ingest.TrackerConfig{MaxAttempts: 1}}, sa)
	b, _ := startServeWith(t, lb, ingest.Config{FlushEvery: 5 * time.Millisecond}, newCtlSink())
	ctx := context.Background()
	sa.hold["o0"] <- errors.New("bad line")
	if r := b.Submit(ctx, orderEvents(0, 1), ingest.LevelProcessed, 10*time.Second)[0]; r.Status.Status != ingest.FailedFinal {
		t.Fatalf("o0: %+v, want FAILED_FINAL", r)
	}
	sa.hold["o0"] <- nil // fixed: the next attempt succeeds
	if st, err := b.Resubmit(ctx, "o0"); err != nil || st.Status != ingest.Persisted || st.Generation != 1 {
		t.Fatalf("resubmit through b: %+v %v", st, err)
	}
	waitStored(t, lb, "o0", ingest.Processed, 10*time.Second)
	if st, err := b.Status("o0"); err != nil || st.Status != ingest.Processed || st.Generation != 1 {
		t.Fatalf("b's status of o0 after a processed it: %+v %v", st, err)
	}
	if r := b.Submit(ctx, orderEvents(0, 1), ingest.LevelProcessed, 3*time.Second)[0]; r.Err != nil || !r.Duplicate || r.Status.Status != ingest.Processed {
		t.Fatalf("resend of o0 to b: %+v", r)
	}
}
