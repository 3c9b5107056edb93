package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// ClusterTrees with a limit below 1 returns no tree: it panicked (out[:limit] with a
// negative limit) once this host or another kept none.
func TestClusterTreesLimitBelowOne(t *testing.T) {
	c := &testtopo.Counted{Roots: 20, Fanout: 2, FailEvery: 5, SinkTasks: 2}
	// Tasks: src 1, fan 2, sink 3 and 4, acker 5.
	of := map[int]int{1: 1, 2: 2, 3: 2, 4: 1, 5: 1}
	rts, recs := startHosts(t, c, of, []float64{1, 0})
	waitTree(t, recs[0], "15", func(tr lineage.Tree) bool { return tr.Outcome == lineage.Failed })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, rt := range rts {
		for _, limit := range []int{0, -1} {
			for _, o := range []lineage.Outcome{lineage.Failed, ""} {
				trees, err := rt.ClusterTrees(ctx, o, limit)
				if err != nil || len(trees) != 0 {
					t.Errorf("ClusterTrees(%q, %d): %d trees, %v; want none, no error", o, limit, len(trees), err)
				}
			}
		}
	}
}

// cappedTransport is a local transport that refuses a control message over max, as
// the NATS transport refuses one over the server's max_payload (1 MiB by default:
// control is never split), and remembers the largest it refused.
type cappedTransport struct {
	*transport.Local
	max     int
	refused atomic.Int64 // the largest body refused, 0 if none
}

func (c *cappedTransport) Send(m *transport.Message) error {
	if m.Kind == transport.KindControl && len(m.Body) > c.max {
		if n := int64(len(m.Body)); n > c.refused.Load() {
			c.refused.Store(n)
		}
		return fmt.Errorf("capped transport: a control message of %d bytes, over max_payload %d", len(m.Body), c.max)
	}
	return c.Local.Send(m)
}

// failTopology: src emits roots 0 to n-1 (message id i), and fail fails each with a
// long reason.
type failSpout struct {
	n, next int
	ended   *atomic.Int64
	out     topology.SpoutCollector
}

func (s *failSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}

func (s *failSpout) NextTuple() {
	if s.next < s.n {
		_ = s.out.Emit(tuple.Values{s.next}, s.next)
		s.next++
	}
}
func (s *failSpout) Ack(any)      { s.ended.Add(1) }
func (s *failSpout) Fail(any)     { s.ended.Add(1) }
func (s *failSpout) Close() error { return nil }

type failBolt struct {
	reason string
	out    topology.OutputCollector
}

func (b *failBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}

func (b *failBolt) Execute(in *tuple.Tuple) {
	_ = b.out.FailWith(in, fmt.Errorf("%s %d", b.reason, in.Value(0).(int)))
}
func (b *failBolt) Cleanup() error { return nil }

func failTopology(t *testing.T, n int, reason string, ended *atomic.Int64) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	b.SetSpout("src", func() topology.Spout { return &failSpout{n: n, ended: ended} }, 1).Output("i")
	b.SetBolt("fail", func() topology.Bolt { return &failBolt{reason: reason} }, 1).ShuffleGrouping("src")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// startOn starts topo on len(samples) hosts of tr, task i on of[i], each with its
// own recorder.
func startOn(t *testing.T, tr transport.Transport, topo *topology.Topology, of map[int]int, samples []float64) ([]*engine.Runtime, []*lineage.Recorder) {
	t.Helper()
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	recs := make([]*lineage.Recorder, len(samples))
	rts := make([]*engine.Runtime, len(samples))
	for i := range rts {
		lc := lineage.DefaultConfig()
		lc.Sample = samples[i]
		var err error
		if recs[i], err = lineage.New(lc); err != nil {
			t.Fatal(err)
		}
		rts[i], err = engine.Start(context.Background(), topo, cfg, engine.WithTransport(tr),
			engine.WithAssignment(engine.Assignment{Host: i + 1, Of: of}), engine.WithLineage(recs[i]), engine.WithSerialization())
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, rt := range rts {
			if err := rt.Stop(context.Background()); err != nil {
				t.Error(err)
			}
			<-rt.Done()
		}
	})
	return rts, recs
}

// waitEnded polls until the spout got Ack or Fail for n roots (bounded: 30 s).
func waitEnded(t *testing.T, ended *atomic.Int64, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ended.Load() < int64(n); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d roots ended", ended.Load(), n)
		}
	}
}

// A bolt on host 2 fails every tuple with a long reason (an error that quotes its
// input, say). Its records are forwarded to the spout's host in messages that a NATS
// server takes (max_payload): the ack's reason was forwarded whole (10000 records
// of any size could wait in the batch), and a chunk of 1000 records was one message
// of several MB, refused whole, its fail points lost.
func TestForwardedBatchesStayUnderMaxPayload(t *testing.T) {
	const n = 300
	var ended atomic.Int64
	reason := strings.Repeat("<quoted input>", 1000) // 14 kB, 6 bytes a '<' or '>' in JSON
	topo := failTopology(t, n, reason, &ended)
	tr := &cappedTransport{Local: transport.NewLocal(), max: 1 << 20}
	// Tasks: src 1, fail 2, acker 3.
	_, recs := startOn(t, tr, topo, map[int]int{1: 1, 2: 2, 3: 1}, []float64{1, 0})
	waitEnded(t, &ended, n)
	withFail := func() (got int) {
		for i := range n {
			if tree, ok := recs[0].Lookup(strconv.Itoa(i)); ok && len(tree.Fails) > 0 {
				got++
			}
		}
		return got
	}
	for deadline := time.Now().Add(20 * time.Second); withFail() < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := withFail(); got != n {
		t.Errorf("%d of %d failed trees have their fail point on the spout's host", got, n)
	}
	if size := tr.refused.Load(); size != 0 {
		t.Errorf("a control message of %d bytes was sent: over max_payload", size)
	}
	tree, _ := recs[0].Lookup("7")
	if len(tree.Nodes) != 1 || len(tree.Nodes[0].Reason) > lineage.MaxReasonBytes {
		t.Fatalf("tree of message 7: nodes %d, reason of %d bytes; want 1 node, reason at most %d bytes", len(tree.Nodes), len(tree.Nodes[0].Reason), lineage.MaxReasonBytes)
	}
	// Cut as the recorder cuts a reason heard on its own host (marked "…").
	want := lineage.ClipReason(reason + " 7")
	if got := tree.Fails[0].Reason; got != want || tree.Nodes[0].Reason != want {
		t.Errorf("reasons of message 7: fail point %q…%q, node %q…%q; want %q…%q", got[:10], got[len(got)-10:],
			tree.Nodes[0].Reason[:10], tree.Nodes[0].Reason[len(tree.Nodes[0].Reason)-10:], want[:10], want[len(want)-10:])
	}
}
