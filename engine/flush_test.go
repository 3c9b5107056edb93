package engine

import (
	"sync"
	"testing"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// initTap is the in-process transport that closes initSent once a spout's acker
// init has reached an acker task.
type initTap struct {
	transport.Transport
	once     sync.Once
	initSent chan struct{}
}

func (o *initTap) Send(m *transport.Message) error {
	msgs := m.Acks
	err := o.Transport.Send(m)
	for _, m := range msgs {
		if m.Kind == acker.Init {
			o.once.Do(func() { close(o.initSent) })
		}
	}
	return err
}

// Tuples and acker inits leave within Config.FlushInterval, whatever the spout's
// pace: here NextTuple emits one tracked tuple and then does not return until the
// bolt has received it and the acker has its init. Before the flush interval a batch
// left only when full or when the round of NextTuple calls ended, so a spout taking
// 10 ms per call delivered its first tuple after 256 calls (2.65 s), and this one
// never did.
func TestSlowSpoutsTuplesLeaveWithinTheFlushInterval(t *testing.T) {
	rec := newRecorder()
	tap := &initTap{Transport: transport.NewLocal(), initSent: make(chan struct{})}
	got := make(chan struct{})
	calls := 0
	b := topology.NewBuilder()
	b.SetSpout("slow", func() topology.Spout {
		return &fnSpout{rec: rec, next: func(out topology.SpoutCollector) {
			calls++
			if calls > 1 {
				return
			}
			_ = out.Emit(tuple.Values{0}, 0)
			// Still inside NextTuple, as a slow spout is for most of its time.
			if waitOrFail(t, got, "the bolt to receive the tuple") {
				waitOrFail(t, tap.initSent, "the acker to receive the init")
			}
		}}
	}, 1).Output("id")
	b.SetBolt("b", bolt(func(b *fnBolt, in *tuple.Tuple) {
		close(got)
		_ = b.out.Ack(in)
	}), 1).ShuffleGrouping("slow")
	cfg := quietConfig()
	cfg.BatchSize = topology.DefaultConfig().BatchSize
	rt := start(t, mustBuild(t, b), cfg, WithTransport(tap))
	rec.waitFor(t, "the ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
}

// A bolt's emits and acks leave within the flush interval too, while its Execute
// goes on: here Execute emits, then waits until the next bolt has received the
// tuple.
func TestSlowBoltsEmitsLeaveWithinTheFlushInterval(t *testing.T) {
	rec := newRecorder()
	got := make(chan struct{})
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1} }, 1).Output("id")
	b.SetBolt("slow", bolt(func(b *fnBolt, in *tuple.Tuple) {
		_ = b.out.Emit(in.Values(), in)
		waitOrFail(t, got, "the next bolt to receive the emit")
		_ = b.out.Ack(in)
	}), 1).ShuffleGrouping("s").Output("id")
	b.SetBolt("next", bolt(func(b *fnBolt, in *tuple.Tuple) {
		close(got)
		_ = b.out.Ack(in)
	}), 1).ShuffleGrouping("slow")
	rt := start(t, mustBuild(t, b), quietConfig())
	rec.waitFor(t, "the ack", func(a, f int) bool { return a == 1 })
	stop(t, rt)
}
