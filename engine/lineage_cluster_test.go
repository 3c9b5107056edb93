package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
)

// startHosts starts c's topology on two hosts of one local transport, task i on
// of[i], each with its own recorder of sample fraction samples[i].
func startHosts(t *testing.T, c *testtopo.Counted, of map[int]int, samples []float64) ([]*engine.Runtime, []*lineage.Recorder) {
	t.Helper()
	topo, err := c.Topology()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	tr := transport.NewLocal()
	recs := make([]*lineage.Recorder, len(samples))
	rts := make([]*engine.Runtime, len(samples))
	for i := range rts {
		lc := lineage.DefaultConfig()
		lc.Sample = samples[i]
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

// waitTree polls rec until root id's tree satisfies ok (bounded: 20 s).
func waitTree(t *testing.T, rec *lineage.Recorder, id string, ok func(lineage.Tree) bool) lineage.Tree {
	t.Helper()
	var tree lineage.Tree
	waitfor.Until(t, 20*time.Second, func() error {
		var found bool
		if tree, found = rec.Lookup(id); !found || !ok(tree) {
			return fmt.Errorf("tree of message %s on the spout's host: %+v (found %v)", id, tree, found)
		}
		return nil
	})
	return tree
}

// The spout is on host 1; fan and one sink task on host 2. Host 2's recorder samples
// nothing of its own: it samples with the bound host 1 greets it with, and forwards
// what its tasks emit, ack and fail to host 1, which keeps the whole tree. Before,
// host 1's tree held the spout's tuple only, and fan's fail point was lost.
func TestLineageOfATreeWhoseTuplesCrossHosts(t *testing.T) {
	c := &testtopo.Counted{Roots: 20, Fanout: 3, FailEvery: 5, SinkTasks: 2}
	// Tasks: src 1, fan 2, sink 3 and 4, acker 5.
	of := map[int]int{1: 1, 2: 2, 3: 2, 4: 1, 5: 1}
	rts, recs := startHosts(t, c, of, []float64{1, 0})

	// Message 1: the spout's tuple, then fan's three, every one acked.
	complete := func(tr lineage.Tree) bool {
		if tr.Outcome != lineage.Completed || len(tr.Nodes) != 4 {
			return false
		}
		for _, n := range tr.Nodes {
			if n.State != lineage.NodeAcked {
				return false
			}
		}
		return true
	}
	tree := waitTree(t, recs[0], "1", complete)
	fanned := 0
	for _, n := range tree.Nodes[1:] {
		if n.Component != "fan" || n.Task != 2 || n.ToComponent != "sink" || (n.ToTask != 3 && n.ToTask != 4) {
			t.Errorf("node %+v: want one emitted by fan task 2 (host 2) to a sink task", n)
		}
		if n.DoneByTask != n.ToTask {
			t.Errorf("node %x acked by task %d, sent to task %d", n.ID, n.DoneByTask, n.ToTask)
		}
		if len(n.Parents) != 1 || n.Parents[0] != tree.Nodes[0].ID {
			t.Errorf("node %x parents %x, want the spout's tuple %x", n.ID, n.Parents, tree.Nodes[0].ID)
		}
		fanned++
	}
	if tree.Nodes[0].Component != "src" || tree.Nodes[0].DoneByTask != 2 {
		t.Errorf("spout's tuple %+v: want src's, acked by fan task 2", tree.Nodes[0])
	}
	if fanned != 3 {
		t.Errorf("fan's tuples %d, want 3", fanned)
	}

	// Message 5 failed in fan, on host 2: the fail point reached host 1.
	failed := waitTree(t, recs[0], "5", func(tr lineage.Tree) bool { return tr.Outcome == lineage.Failed && len(tr.Fails) > 0 })
	if f := failed.Fails[0]; f.Component != "fan" || f.Task != 2 || f.SourceComp != "src" || !strings.Contains(f.Reason, "injected") {
		t.Errorf("fail point %+v: want fan task 2 failing src's tuple, reason injected", f)
	}
	if _, ok := recs[1].Lookup("1"); ok {
		t.Error("host 2 keeps message 1's tree: it belongs to the spout's host")
	}

	// Host 2 has no tree of its own, and asks host 1 for them.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, attempts, ok, err := rts[1].ClusterTree(ctx, "1")
	if err != nil || !ok {
		t.Fatalf("ClusterTree(1) from host 2: found %v, %v", ok, err)
	}
	if got.Root != tree.Root || len(got.Nodes) != 4 || len(attempts) != 1 || attempts[0] != tree.Root {
		t.Errorf("ClusterTree(1) from host 2: root %x, %d nodes, attempts %x; want root %x, 4 nodes, one attempt", got.Root, len(got.Nodes), attempts, tree.Root)
	}
	trees, err := rts[1].ClusterTrees(ctx, lineage.Failed, 50)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, tr := range trees {
		msgs = append(msgs, tr.MsgID)
	}
	if strings.Join(msgs, ",") != "15,10,5,0" {
		t.Errorf("failed trees from host 2, newest first: %v; want 15,10,5,0", msgs)
	}
	if _, _, ok, err := rts[1].ClusterTree(ctx, "no-such-message"); ok || err != nil {
		t.Errorf("ClusterTree of an unknown id: found %v, %v", ok, err)
	}
	for i, rt := range rts {
		if s := rt.Stats(); s.LineageDropped != 0 {
			t.Errorf("host %d dropped %d lineage records", i+1, s.LineageDropped)
		}
	}
}
