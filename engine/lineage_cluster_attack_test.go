package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/internal/waitfor"
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
	waitfor.Until(t, 30*time.Second, func() error {
		if e := ended.Load(); e < int64(n) {
			return fmt.Errorf("%d of %d roots ended", e, n)
		}
		return nil
	})
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
	_ = waitfor.Err(context.Background(), 20*time.Second, func() error {
		if got := withFail(); got < n {
			return fmt.Errorf("%d of %d", got, n)
		}
		return nil
	})
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

// The spout is on host 1, every bolt on host 2. Both stop as soon as the spout has
// heard every tree's outcome: host 2's last acks wait in its forward batch then, and
// must still reach host 1's trees.
func TestLastForwardedAcksSurviveTheStop(t *testing.T) {
	c := &testtopo.Counted{Roots: 20, Fanout: 3, SinkTasks: 2, DropAck: -1}
	topo, err := c.Topology()
	if err != nil {
		t.Fatal(err)
	}
	// Tasks: src 1, fan 2, sink 3 and 4, acker 5.
	of := map[int]int{1: 1, 2: 2, 3: 2, 4: 2, 5: 1}
	tr := transport.NewLocal()
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	lc := lineage.DefaultConfig()
	lc.Sample = 1
	rec, err := lineage.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	var rts []*engine.Runtime
	for h := 1; h <= 2; h++ {
		rt, err := engine.Start(context.Background(), topo, cfg, engine.WithTransport(tr),
			engine.WithAssignment(engine.Assignment{Host: h, Of: of}), engine.WithLineage(rec), engine.WithSerialization())
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	waitfor.Until(t, 20*time.Second, c.Ended)
	errs := make(chan error, len(rts))
	for _, rt := range rts {
		go func() { errs <- rt.Stop(context.Background()) }()
	}
	for range rts {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for _, rt := range rts {
		<-rt.Done()
	}
	for i := range c.Roots {
		tree, ok := rec.Lookup(strconv.Itoa(i))
		if !ok || tree.Outcome != lineage.Completed || len(tree.Nodes) != 4 {
			t.Errorf("message %d: found %v, outcome %s, %d nodes; want completed, 4 nodes", i, ok, tree.Outcome, len(tree.Nodes))
			continue
		}
		for _, n := range tree.Nodes {
			if n.State != lineage.NodeAcked {
				t.Errorf("message %d: node %x (%s to %s) %s, want acked", i, n.ID, n.Component, n.ToComponent, n.State)
			}
		}
	}
}

// ClusterTrees and ClusterTree asked from many goroutines at once on the host
// without a spout; then once the spout's host has left (said goodbye), and once
// this one has stopped: each answers with what it has and says what is missing.
func TestClusterTreesConcurrentAndAfterStops(t *testing.T) {
	c := &testtopo.Counted{Roots: 20, Fanout: 2, FailEvery: 5, SinkTasks: 2}
	topo, err := c.Topology()
	if err != nil {
		t.Fatal(err)
	}
	// Tasks: src 1, fan 2, sink 3 and 4, acker 5.
	of := map[int]int{1: 1, 2: 2, 3: 2, 4: 1, 5: 1}
	rts, recs, cut := startCuttable(t, topo, of)
	waitTree(t, recs[0], "19", func(tr lineage.Tree) bool { return tr.Outcome == lineage.Completed })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 32
	errs := make(chan error, n)
	for i := range n {
		go func() {
			if i%2 == 0 {
				trees, err := rts[1].ClusterTrees(ctx, lineage.Failed, 3)
				if err == nil && (len(trees) != 3 || trees[0].MsgID != "15") {
					err = fmt.Errorf("failed trees %+v, want 3, message 15 first", trees)
				}
				errs <- err
				return
			}
			id := strconv.Itoa(i % 20)
			tree, _, ok, err := rts[1].ClusterTree(ctx, id)
			if err == nil && (!ok || tree.MsgID != id) {
				err = fmt.Errorf("tree of %s: found %v, message %q", id, ok, tree.MsgID)
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}

	// Host 1 leaves: host 2 answers without it and says so, at once. Once host 1 is
	// Done its goodbye is sent; host 2 may not have read it yet (an ask then ends at
	// it), or may have finished since (its input ended with host 1's spout: it
	// lingers only 100 ms), and says so in each case: one call, no retry.
	cut()
	<-rts[0].Done()
	if _, err := rts[1].ClusterTrees(ctx, lineage.Failed, 3); err == nil || !strings.Contains(err.Error(), "hosts [1] have finished (said goodbye)") {
		t.Fatalf("ClusterTrees once host 1 left: %v; want host 1 named as gone", err)
	}
	if _, _, ok, err := rts[1].ClusterTree(ctx, "3"); ok || err == nil || !strings.Contains(err.Error(), "said goodbye") {
		t.Errorf("ClusterTree once host 1 left: found %v, %v; want not found, host 1 said goodbye", ok, err)
	}
	if err := rts[1].Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-rts[1].Done()
	if trees, err := rts[1].ClusterTrees(ctx, "", 10); len(trees) != 0 || err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("ClusterTrees of a stopped engine: %d trees, %v; want none, stopped", len(trees), err)
	}
	// Host 1's own engine, stopped, still answers from its recorder.
	if tree, _, ok, _ := rts[0].ClusterTree(ctx, "3"); !ok || tree.MsgID != "3" {
		t.Errorf("ClusterTree(3) on the stopped spout host: found %v, %+v", ok, tree)
	}
}

// twoSpouts: src has a task on each of hosts 1 and 2, emitting roots "k-i" (k its
// task index); mid, on host 3, fails every fourth and sends the others to sink twice.
type idSpout struct {
	n, next int
	prefix  string
	ended   *atomic.Int64
	out     topology.SpoutCollector
}

func (s *idSpout) Open(_ context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	s.out, s.prefix = out, strconv.Itoa(tc.TaskIndex)+"-"
	return nil
}

func (s *idSpout) NextTuple() {
	if s.next < s.n {
		_ = s.out.Emit(tuple.Values{s.next}, s.prefix+strconv.Itoa(s.next))
		s.next++
	}
}
func (s *idSpout) Ack(any)      { s.ended.Add(1) }
func (s *idSpout) Fail(any)     { s.ended.Add(1) }
func (s *idSpout) Close() error { return nil }

type midBolt struct{ out topology.OutputCollector }

func (b *midBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}

func (b *midBolt) Execute(in *tuple.Tuple) {
	i := in.Value(0).(int)
	if i%4 == 0 {
		_ = b.out.FailWith(in, fmt.Errorf("mid: %d", i))
		return
	}
	_ = b.out.Emit(tuple.Values{i}, in)
	_ = b.out.Emit(tuple.Values{i}, in)
	_ = b.out.Ack(in)
}
func (b *midBolt) Cleanup() error { return nil }

type ackBolt struct{ out topology.OutputCollector }

func (b *ackBolt) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	return nil
}
func (b *ackBolt) Execute(in *tuple.Tuple) { _ = b.out.Ack(in) }
func (b *ackBolt) Cleanup() error          { return nil }

// With a spout task on each of two hosts, each keeps the trees its task rooted,
// whole (bolts on a third host forward to both), and the third asks both.
func TestLineageWithSpoutsOnTwoHosts(t *testing.T) {
	const n = 40
	var ended atomic.Int64
	b := topology.NewBuilder()
	b.SetSpout("src", func() topology.Spout { return &idSpout{n: n, ended: &ended} }, 2).Output("i")
	b.SetBolt("mid", func() topology.Bolt { return &midBolt{} }, 1).Output("i").ShuffleGrouping("src")
	b.SetBolt("sink", func() topology.Bolt { return &ackBolt{} }, 2).ShuffleGrouping("mid")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Tasks: src 1 and 2, mid 3, sink 4 and 5, acker 6.
	of := map[int]int{1: 1, 2: 2, 3: 3, 4: 1, 5: 2, 6: 3}
	rts, recs := startOn(t, transport.NewLocal(), topo, of, []float64{1, 1, 0})
	waitEnded(t, &ended, 2*n)
	for h := range 2 {
		for i := range n {
			id := fmt.Sprintf("%d-%d", h, i)
			other := fmt.Sprintf("%d-%d", 1-h, i)
			if _, ok := recs[h].Lookup(other); ok {
				t.Errorf("host %d keeps the tree of %s, rooted on the other host", h+1, other)
			}
			want := func(tr lineage.Tree) bool {
				if i%4 == 0 {
					return tr.Outcome == lineage.Failed && len(tr.Fails) == 1 && tr.Fails[0].Component == "mid" &&
						len(tr.Nodes) == 1 && tr.Nodes[0].State == lineage.NodeFailed
				}
				if tr.Outcome != lineage.Completed || len(tr.Nodes) != 3 {
					return false
				}
				for _, nd := range tr.Nodes {
					if nd.State != lineage.NodeAcked || nd.Component == "" {
						return false
					}
				}
				return tr.Nodes[1].Component == "mid" && tr.Nodes[2].Component == "mid"
			}
			waitTree(t, recs[h], id, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	trees, err := rts[2].ClusterTrees(ctx, lineage.Failed, 1000)
	if err != nil || len(trees) != 2*n/4 {
		t.Errorf("failed trees from host 3: %d, %v; want %d", len(trees), err, 2*n/4)
	}
	for _, id := range []string{"0-5", "1-5"} {
		if tree, _, ok, err := rts[2].ClusterTree(ctx, id); !ok || err != nil || len(tree.Nodes) != 3 {
			t.Errorf("ClusterTree(%s) from host 3: found %v, %v, %d nodes", id, ok, err, len(tree.Nodes))
		}
	}
}

// garbleTransport garbles the lineage answers (a treeAnswer, JSON) host from sends.
type garbleTransport struct {
	*transport.Local
	from int
}

func (g *garbleTransport) Send(m *transport.Message) error {
	if m.Kind == transport.KindControl && m.From == transport.Host(g.from) &&
		(strings.HasPrefix(string(m.Body), `{"trees"`) || string(m.Body) == "{}") {
		c := *m
		c.Body = []byte(`{"trees":[{"Root":"not a number"}]}`)
		m = &c
	}
	return g.Local.Send(m)
}

// A spout host whose answer does not decode: ClusterTrees and ClusterTree still
// return the other hosts' trees (newest first, within the limit), and name it. They
// returned at the bad answer, without the answers of the hosts after it.
func TestClusterTreesWithAnAnswerThatDoesNotDecode(t *testing.T) {
	const n = 40
	var ended atomic.Int64
	b := topology.NewBuilder()
	b.SetSpout("src", func() topology.Spout { return &idSpout{n: n, ended: &ended} }, 2).Output("i")
	b.SetBolt("mid", func() topology.Bolt { return &midBolt{} }, 1).Output("i").ShuffleGrouping("src")
	b.SetBolt("sink", func() topology.Bolt { return &ackBolt{} }, 2).ShuffleGrouping("mid")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Tasks: src 1 and 2, mid 3, sink 4 and 5, acker 6. Host 3 keeps no tree; it
	// asks host 1 (garbled) and host 2 (spout task 2, whose answer arrives).
	of := map[int]int{1: 1, 2: 2, 3: 3, 4: 1, 5: 2, 6: 3}
	rts, recs := startOn(t, &garbleTransport{Local: transport.NewLocal(), from: 1}, topo, of, []float64{1, 1, 0})
	waitEnded(t, &ended, 2*n)
	waitTree(t, recs[1], "1-36", func(tr lineage.Tree) bool { return tr.Outcome == lineage.Failed })
	want := recs[1].Recent(lineage.Failed, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, asker := range []int{2, 3} {
		trees, err := rts[asker-1].ClusterTrees(ctx, lineage.Failed, 3)
		var got []string
		for _, tr := range trees {
			got = append(got, tr.MsgID)
		}
		if len(trees) != 3 || trees[0].MsgID != want[0].MsgID || trees[1].MsgID != want[1].MsgID || trees[2].MsgID != want[2].MsgID {
			t.Errorf("failed trees from host %d: %v; want host 2's 3 newest %s, %s, %s", asker, got, want[0].MsgID, want[1].MsgID, want[2].MsgID)
		}
		if err == nil || !strings.Contains(err.Error(), "host 1") {
			t.Errorf("failed trees from host %d: error %v, want one naming host 1", asker, err)
		}
	}
	// By id: host 2's tree is found though host 1's answer does not decode.
	tree, _, ok, err := rts[2].ClusterTree(ctx, "1-5")
	if !ok || tree.MsgID != "1-5" || err == nil || !strings.Contains(err.Error(), "host 1") {
		t.Errorf("ClusterTree(1-5) from host 3: found %v (%q), %v; want found, an error naming host 1", ok, tree.MsgID, err)
	}
}

// garbleStats makes host from's stats replies undecodable.
type garbleStats struct {
	*transport.Local
	from int
}

func (g *garbleStats) Send(m *transport.Message) error {
	if m.Kind == transport.KindControl && m.From == transport.Host(g.from) && strings.HasPrefix(string(m.Body), `{"Components"`) {
		c := *m
		c.Body = []byte(`{"Components":7}`)
		m = &c
	}
	return g.Local.Send(m)
}

// ClusterStats, like ClusterTrees, keeps the hosts whose replies decode when one does
// not, and names it: it returned at the bad reply, without the hosts after it.
func TestClusterStatsWithAReplyThatDoesNotDecode(t *testing.T) {
	const n = 40
	var ended atomic.Int64
	b := topology.NewBuilder()
	b.SetSpout("src", func() topology.Spout { return &idSpout{n: n, ended: &ended} }, 2).Output("i")
	b.SetBolt("mid", func() topology.Bolt { return &midBolt{} }, 1).Output("i").ShuffleGrouping("src")
	b.SetBolt("sink", func() topology.Bolt { return &ackBolt{} }, 2).ShuffleGrouping("mid")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Tasks: src 1 and 2, mid 3, sink 4 and 5, acker 6; host 3 asks hosts 1 and 2.
	of := map[int]int{1: 1, 2: 2, 3: 3, 4: 1, 5: 2, 6: 3}
	rts, _ := startOn(t, &garbleStats{Local: transport.NewLocal(), from: 1}, topo, of, []float64{0, 0, 0})
	waitEnded(t, &ended, 2*n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := rts[2].ClusterStats(ctx)
	if err == nil || !strings.Contains(err.Error(), "host 1") {
		t.Errorf("ClusterStats from host 3: error %v, want one naming host 1", err)
	}
	src := s.Components["src"]
	if src == nil || len(src.ByTask) != 1 || src.ByTask[0].Task != 2 {
		t.Fatalf("src's tasks in host 3's ClusterStats: %+v; want host 2's task 2 only", src)
	}
	if mid := s.Components["mid"]; mid == nil || len(mid.ByTask) != 1 {
		t.Errorf("mid (host 3's own task) in ClusterStats: %+v", mid)
	}
}

// muteStats drops host from's stats replies, and closes asked at the first one: a
// ClusterStats that asked that host is then waiting for it.
type muteStats struct {
	*transport.Local
	from  int
	once  sync.Once
	asked chan struct{}
}

func (m *muteStats) Send(msg *transport.Message) error {
	if msg.Kind == transport.KindControl && msg.From == transport.Host(m.from) && strings.HasPrefix(string(msg.Body), `{"Components"`) {
		m.once.Do(func() { close(m.asked) })
		return nil
	}
	return m.Local.Send(msg)
}

// A ClusterStats waiting for a host that then says goodbye stops waiting for it and
// names it as gone: it waited until its context ended (or this engine stopped), then
// said the host did not answer, though its goodbye had said it never would.
func TestClusterStatsStopsWaitingForAHostThatSaysGoodbye(t *testing.T) {
	const n = 20
	var ended atomic.Int64
	b := topology.NewBuilder()
	b.SetSpout("src", func() topology.Spout { return &idSpout{n: n, ended: &ended} }, 2).Output("i")
	b.SetBolt("sink", func() topology.Bolt { return &ackBolt{} }, 2).ShuffleGrouping("src")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// Tasks: src 1 and 2, sink 3 and 4, acker 5. Host 2 has a spout task of its own,
	// so it runs on once host 1 has left: only the goodbye can end its wait.
	of := map[int]int{1: 1, 2: 2, 3: 1, 4: 2, 5: 2}
	tr := &muteStats{Local: transport.NewLocal(), from: 1, asked: make(chan struct{})}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	// Host 1 is cut off by its start context (a stop would stop host 2 as well).
	cut1, cut := context.WithCancel(context.Background())
	defer cut()
	var rts []*engine.Runtime
	for h := 1; h <= 2; h++ {
		start := context.Background()
		if h == 1 {
			start = cut1
		}
		rt, err := engine.Start(start, topo, cfg, engine.WithTransport(tr), engine.WithAssignment(engine.Assignment{Host: h, Of: of}))
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, rt)
	}
	defer func() {
		for _, rt := range rts {
			_ = rt.Stop(context.Background())
			<-rt.Done()
		}
	}()
	waitEnded(t, &ended, 2*n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := rts[1].ClusterStats(ctx)
		errc <- err
	}()
	<-tr.asked // host 1 was asked; its reply is lost: host 2 waits for it
	cut()
	<-rts[0].Done() // its goodbye is sent
	err = <-errc
	if err == nil || !strings.Contains(err.Error(), "hosts [1] have finished (said goodbye)") || ctx.Err() != nil {
		t.Errorf("ClusterStats from host 2 once host 1 left: %v; want at once an error naming host 1 as gone", err)
	}
	select {
	case <-rts[1].Done():
		t.Error("host 2 stopped: the test means it to run on")
	default:
	}
}

// An engine that has stopped still names the hosts that had said goodbye before it
// did: it said only that it had stopped and asked nobody. Host 2 here has no spout:
// once host 1 (the spout's) leaves, its input ends and it finishes on its own.
func TestClusterAnswersOfAStoppedEngineNameTheHostsThatLeft(t *testing.T) {
	c := &testtopo.Counted{Roots: 20, Fanout: 2, FailEvery: 5, SinkTasks: 2}
	topo, err := c.Topology()
	if err != nil {
		t.Fatal(err)
	}
	// Tasks: src 1, fan 2, sink 3 and 4, acker 5.
	of := map[int]int{1: 1, 2: 2, 3: 2, 4: 1, 5: 1}
	rts, recs, cut := startCuttable(t, topo, of)
	waitTree(t, recs[0], "19", func(tr lineage.Tree) bool { return tr.Outcome == lineage.Completed })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cut()
	<-rts[0].Done()
	select {
	case <-rts[1].Done():
	case <-ctx.Done():
		t.Fatal("host 2 did not finish once host 1, the spout's, had left")
	}
	want := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "stopped") || !strings.Contains(err.Error(), "hosts [1] have finished (said goodbye)") {
			t.Errorf("%s of host 2, stopped after host 1 left: %v; want an error saying it stopped and naming host 1 as gone", what, err)
		}
	}
	trees, err := rts[1].ClusterTrees(ctx, lineage.Failed, 3)
	if len(trees) != 0 {
		t.Errorf("ClusterTrees of host 2 (no spout), stopped: %d trees, want none", len(trees))
	}
	want("ClusterTrees", err)
	_, _, _, err = rts[1].ClusterTree(ctx, "3")
	want("ClusterTree", err)
	_, err = rts[1].ClusterStats(ctx)
	want("ClusterStats", err)
}

// startCuttable starts topo on two hosts of a local transport, tasks placed by of,
// each recording every tree; host 1 runs on a start context that cut ends (a
// stop would stop host 2 as well). Both are stopped when the test ends.
func startCuttable(t *testing.T, topo *topology.Topology, of map[int]int) ([]*engine.Runtime, []*lineage.Recorder, context.CancelFunc) {
	t.Helper()
	tr := transport.NewLocal()
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cut1, cut := context.WithCancel(context.Background())
	t.Cleanup(cut)
	var rts []*engine.Runtime
	var recs []*lineage.Recorder
	t.Cleanup(func() {
		for _, rt := range rts {
			_ = rt.Stop(context.Background())
			<-rt.Done()
		}
	})
	for h := 1; h <= 2; h++ {
		lc := lineage.DefaultConfig()
		lc.Sample = 1
		rec, err := lineage.New(lc)
		if err != nil {
			t.Fatal(err)
		}
		start := context.Background()
		if h == 1 {
			start = cut1
		}
		rt, err := engine.Start(start, topo, cfg, engine.WithTransport(tr),
			engine.WithAssignment(engine.Assignment{Host: h, Of: of}), engine.WithLineage(rec), engine.WithSerialization())
		if err != nil {
			t.Fatal(err)
		}
		rts, recs = append(rts, rt), append(recs, rec)
	}
	return rts, recs, cut
}
