package ingest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ctxSink is a sink whose write waits on the context it was prepared with (the
// Start context, as sink.Bolt's transactions do) and fails the input with the
// context's error when it is done: what a database driver gives a write cut off by
// a cancelled context.
type ctxSink struct {
	ctx     context.Context
	out     topology.OutputCollector
	entered chan string // gets the first id executed
	failed  atomic.Int64
}

func (b *ctxSink) Prepare(ctx context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.ctx, b.out = ctx, out
	return nil
}
func (b *ctxSink) Cleanup() error { return nil }
func (b *ctxSink) Execute(t *tuple.Tuple) {
	select {
	case b.entered <- t.StringByField("event_id"):
	default:
	}
	<-b.ctx.Done()
	b.failed.Add(1)
	_ = b.out.FailWith(t, fmt.Errorf("sink: write: %w", b.ctx.Err()))
}

// Cancelling the context given to engine.Start is a stop (a signal context, as
// docs/repair.md describes a stop): the event whose sink write it cut off is neither
// failed nor charged an attempt, however many runs end that way, and it is processed after a
// restart. Before the fix the runtime could deliver the sink's "context canceled"
// fail to the log spout (with MaxAttempts 1 the event was dead-lettered by a mere
// shutdown), and each restart charged the interrupted attempt as if the process had
// died (dead-lettered at the second restart: "1 attempts started and none finished").
func TestCancelledStartContextChargesNoAttempt(t *testing.T) {
	mem := vfs.NewMem()
	cfg := Config{Tracker: TrackerConfig{MaxAttempts: 1}}
	for run := range 5 {
		id := fmt.Sprintf("e%d", run)
		l, err := eventlog.Open(eventlog.Options{Dir: "data", FS: mem})
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Log, c.Logger, c.FlushEvery = l, quiet(), 5*time.Millisecond
		svc, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		if res := svc.Submit(context.Background(), []event.Event{{ID: id, Source: "orders", Type: "order_line", Payload: []byte(`{}`)}}, LevelPersisted, time.Minute); res[0].Status.Status != Persisted {
			t.Fatalf("submit %s: %+v", id, res[0])
		}
		sink := &ctxSink{entered: make(chan string, 1)}
		b := topology.NewBuilder()
		b.SetSpout("log", svc.Spout(), 1).Output(SpoutFields...)
		b.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("log")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		tc := topology.DefaultConfig()
		tc.Logger = quiet()
		ctx, cancel := context.WithCancel(context.Background())
		rt, err := engine.Start(ctx, topo, tc)
		if err != nil {
			t.Fatal(err)
		}
		// The sink writes one event at a time: the oldest unfinished one (e0) is the
		// one whose write each run cuts off; the others wait in the sink's queue.
		entered := <-sink.entered
		cancel()
		<-rt.Done()
		_ = rt.Stop(context.Background())
		if err := svc.Close(); err != nil {
			t.Fatal(err)
		}
		st, err := svc.Status(entered)
		if err != nil {
			t.Fatal(err)
		}
		dl, err := svc.DeadLetters(10)
		if err != nil {
			t.Fatal(err)
		}
		if sink.failed.Load() == 0 {
			t.Fatal("the sink's write was not cut off by the cancel")
		}
		if st.Status != Persisted || st.LastError != "" || len(dl) != 0 {
			t.Fatalf("run %d: after a cancelled Start context %s is %s (last error %q), %d dead letters; want PERSISTED, no error, none",
				run, entered, st.Status, st.LastError, len(dl))
		}
		// No event so far is charged; the one in the sink was given its attempt back.
		for i := 0; i <= run; i++ {
			eid := fmt.Sprintf("e%d", i)
			st, err := svc.Status(eid)
			if err != nil {
				t.Fatal(err)
			}
			last := st.Transitions[len(st.Transitions)-1]
			if st.Status != Persisted || st.Attempts != 0 || (eid == entered && last.Step != StepStopped) {
				t.Fatalf("run %d: %s is %s with %d attempts, last step %q; want PERSISTED, 0 attempts (and %q for %s, the one cut off)",
					run, eid, st.Status, st.Attempts, last.Step, StepStopped, entered)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A topology that completes: every interrupted event is processed, on its one
	// charged attempt (MaxAttempts 1).
	r := startRig(t, mem, newSink(nil), cfg)
	for run := range 5 {
		id := fmt.Sprintf("e%d", run)
		var st EventStatus
		waitfor.True(t, 10*time.Second, id+" processed", func() bool {
			var err error
			st, err = r.svc.Status(id)
			return err == nil && (st.Status == Processed || st.Status == FailedFinal)
		})
		if st.Status != Processed || st.Attempts != 1 {
			t.Fatalf("%s after 5 cancelled runs: %s, %d attempts, last error %q; want PROCESSED after 1", id, st.Status, st.Attempts, st.LastError)
		}
	}
}
