package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// outcomeTap is the in-process transport that closes failSent once the acker has
// delivered a Failed outcome to a spout's inbox.
type outcomeTap struct {
	transport.Transport
	once     sync.Once
	failSent chan struct{}
}

func (o *outcomeTap) Send(m *transport.Message) error {
	outs := m.Outcomes
	err := o.Transport.Send(m)
	for _, out := range outs {
		if out.Result == acker.Failed {
			o.once.Do(func() { close(o.failSent) })
		}
	}
	return err
}

// waitOrFail waits for ch from a task's goroutine, where t.Fatal may not be called:
// after a bound that only a hang reaches, it marks the test failed and returns false.
func waitOrFail(t *testing.T, ch <-chan struct{}, what string) bool {
	select {
	case <-ch:
		return true
	case <-time.After(20 * time.Second):
		t.Errorf("timed out waiting for %s", what)
		return false
	}
}

// fnSpout is a spout whose NextTuple is a function; it records acks and fails.
type fnSpout struct {
	rec  *recorder
	out  topology.SpoutCollector
	next func(out topology.SpoutCollector)
}

func (s *fnSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}
func (s *fnSpout) NextTuple()   { s.next(s.out) }
func (s *fnSpout) Ack(id any)   { s.rec.note("ack", id) }
func (s *fnSpout) Fail(id any)  { s.rec.note("fail", id) }
func (s *fnSpout) Close() error { return nil }

// Cancelling Start's context is a stop: a bolt whose work it cuts off ("context
// canceled", as a sink's transaction gets) fails its input, and the spout is not told:
// the tree is abandoned. The spout is kept busy emitting while the failure comes
// back, so its next loop drains the outcome before it notices the stop; before the
// fix that delivered Fail(0).
func TestCancelledStartContextNeverFailsTrees(t *testing.T) {
	rec := newRecorder()
	tap := &outcomeTap{Transport: transport.NewLocal(), failSent: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	entered := make(chan struct{})
	calls := 0
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &fnSpout{rec: rec, next: func(out topology.SpoutCollector) {
			calls++
			switch calls {
			case 1:
				_ = out.Emit(tuple.Values{0}, 0)
			case 2: // emits nothing: the round ends and tuple 0 is flushed
			case 3:
				if waitOrFail(t, entered, "the bolt to start on tuple 0") {
					cancel()
					waitOrFail(t, tap.failSent, "the bolt's failure to reach the spout's inbox")
				}
				_ = out.Emit(tuple.Values{1}, 1) // busy: the spout loops on at once
			}
		}}
	}, 1).Output("id")
	b.SetBolt("write", func() topology.Bolt {
		return &ctxBolt{execute: func(b *ctxBolt, in *tuple.Tuple) {
			if in.ValueByField("id") == 0 {
				close(entered)
			}
			<-b.ctx.Done()
			_ = b.out.FailWith(in, fmt.Errorf("write: %w", b.ctx.Err()))
		}}
	}, 1).ShuffleGrouping("s")
	rt, err := Start(ctx, mustBuild(t, b), quietConfig(), WithTransport(tap))
	if err != nil {
		t.Fatal(err)
	}
	<-rt.Done()
	err = rt.Stop(context.Background())
	if a, f := rec.counts(); a != 0 || f != 0 {
		t.Fatalf("after a cancelled Start context: %d acks, %d fails (%v); want none", a, f, rec.order)
	}
	if c := rt.Stats().Components["s"]; c.Abandoned != 2 || c.Failed != 0 || !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("abandoned %d failed %d, Stop = %v; want 2 abandoned, 0 failed, ErrShutdownTimeout", c.Abandoned, c.Failed, err)
	}
}

// ctxBolt is a Bolt that keeps the context it was prepared with.
type ctxBolt struct {
	ctx     context.Context
	out     topology.OutputCollector
	execute func(b *ctxBolt, t *tuple.Tuple)
}

func (b *ctxBolt) Prepare(ctx context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.ctx, b.out = ctx, out
	return nil
}
func (b *ctxBolt) Execute(t *tuple.Tuple) { b.execute(b, t) }
func (b *ctxBolt) Cleanup() error         { return nil }

// holdingBolt holds every input until Drain, which acks them; it counts Drain calls.
type holdingBolt struct {
	out    topology.OutputCollector
	held   []*tuple.Tuple
	got    chan struct{}
	drains *atomic.Int64
}

func (b *holdingBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *holdingBolt) Execute(t *tuple.Tuple) {
	b.held = append(b.held, t)
	b.got <- struct{}{}
}
func (b *holdingBolt) Drain() {
	b.drains.Add(1)
	for _, t := range b.held {
		_ = b.out.Ack(t)
	}
	b.held = nil
}
func (b *holdingBolt) Cleanup() error { return nil }

// A graceful Stop drains a Drainer and returns nil once its trees are acked; a
// cancelled Start context (a hard stop) does not call Drain: the writes would be cut
// off, and the trees are abandoned.
func TestStopDrainsButAHardStopDoesNot(t *testing.T) {
	for _, hard := range []bool{false, true} {
		t.Run(fmt.Sprintf("hard=%v", hard), func(t *testing.T) {
			rec := newRecorder()
			var drains atomic.Int64
			got := make(chan struct{}, 5)
			b := topology.NewBuilder()
			b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 5} }, 1).Output("id")
			b.SetBolt("hold", func() topology.Bolt { return &holdingBolt{got: got, drains: &drains} }, 1).ShuffleGrouping("s")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt, err := Start(ctx, mustBuild(t, b), quietConfig())
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				<-got
			}
			if hard {
				cancel()
			}
			sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer scancel()
			err = rt.Stop(sctx)
			<-rt.Done()
			a, f := rec.counts()
			switch {
			case hard && (drains.Load() != 0 || a != 0 || f != 0 || !errors.Is(err, ErrShutdownTimeout)):
				t.Errorf("hard stop: %d drains, %d acks, %d fails, Stop = %v; want none, ErrShutdownTimeout", drains.Load(), a, f, err)
			case !hard && (drains.Load() == 0 || a != 5 || f != 0 || err != nil):
				t.Errorf("graceful stop: %d drains, %d acks, %d fails, Stop = %v; want some, 5, 0, nil", drains.Load(), a, f, err)
			}
		})
	}
}

// A graceful Stop whose deadline passes is a stop too: the spout gives up its
// pending tree, and a bolt still inside a write when Stop gave up (Stop's context
// does not end the one Prepare got; the write ends by its own timeout) fails its
// input afterwards without the spout being told: Fail is never called.
func TestStopPastItsDeadlineNeverFailsTrees(t *testing.T) {
	rec := newRecorder()
	entered := make(chan struct{})
	release := make(chan struct{})
	failed := make(chan struct{})
	calls := 0
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &fnSpout{rec: rec, next: func(out topology.SpoutCollector) {
			if calls++; calls == 1 {
				_ = out.Emit(tuple.Values{0}, 0)
			}
		}}
	}, 1).Output("id")
	b.SetBolt("write", func() topology.Bolt {
		return &ctxBolt{execute: func(b *ctxBolt, in *tuple.Tuple) {
			close(entered)
			<-release // a sink write that outlasts the stop
			_ = b.out.FailWith(in, fmt.Errorf("write: %w", context.DeadlineExceeded))
			close(failed)
		}}
	}, 1).ShuffleGrouping("s")
	rt, err := Start(context.Background(), mustBuild(t, b), quietConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !waitOrFail(t, entered, "the bolt to start on tuple 0") {
		t.FailNow()
	}
	deadline, cancel := context.WithCancel(context.Background())
	cancel() // the deadline has passed
	err = rt.Stop(deadline)
	close(release)
	if !waitOrFail(t, failed, "the bolt to fail its input") {
		t.FailNow()
	}
	<-rt.Done()
	if a, f := rec.counts(); a != 0 || f != 0 {
		t.Fatalf("after a Stop past its deadline: %d acks, %d fails (%v); want none", a, f, rec.order)
	}
	if c := rt.Stats().Components["s"]; c.Abandoned != 1 || c.Failed != 0 || !errors.Is(err, ErrShutdownTimeout) {
		t.Fatalf("abandoned %d failed %d, Stop = %v; want 1 abandoned, 0 failed, ErrShutdownTimeout", c.Abandoned, c.Failed, err)
	}
}
