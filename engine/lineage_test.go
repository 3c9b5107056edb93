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
)

func runCounted(t *testing.T, c *testtopo.Counted, sample float64) *lineage.Recorder {
	t.Helper()
	lc := lineage.DefaultConfig()
	lc.Sample = sample
	rec, err := lineage.New(lc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.MessageTimeout = 200 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rt, err := c.Start(cfg, engine.WithLineage(rec))
	if err != nil {
		t.Fatal(err)
	}
	if c.DropAck >= 0 {
		// The holders answer after the timeout, at their next wake-up.
		_ = waitfor.Err(context.Background(), 20*time.Second, func() error {
			if tr, ok := rec.Lookup("7"); !ok || reported(tr) < c.Fanout {
				return fmt.Errorf("root 7: %d holders reported (found %v), want %d", reported(tr), ok, c.Fanout)
			}
			return nil
		})
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec
}

// reported counts the holders that a task reported itself.
func reported(tr lineage.Tree) int {
	n := 0
	for _, h := range tr.Holders {
		if !h.FromLineage {
			n++
		}
	}
	return n
}

// TestLineageNamesTheTaskThatNeverAcked: sink (task 3) keeps root 7's tuples without
// acking them. With no sampling at all, the timed-out tree still names the task that
// holds each tuple, what it got it from, and since when.
func TestLineageNamesTheTaskThatNeverAcked(t *testing.T) {
	c := &testtopo.Counted{Roots: 50, Fanout: 2, SinkTasks: 1, DropAck: 7}
	rec := runCounted(t, c, 0)
	tr, ok := rec.Lookup("7")
	if !ok {
		t.Fatal("message 7 has no lineage")
	}
	if tr.Outcome != lineage.TimedOut || tr.Sampled || len(tr.Nodes) != 0 {
		t.Fatalf("outcome %s sampled %v nodes %d, want timed_out, unsampled, no nodes", tr.Outcome, tr.Sampled, len(tr.Nodes))
	}
	if !strings.HasPrefix(tr.Reason, "message timeout") || tr.Spout != "src" || tr.SpoutTask != 1 {
		t.Errorf("reason %q spout %s[%d]", tr.Reason, tr.Spout, tr.SpoutTask)
	}
	if len(tr.Holders) != 2 {
		t.Fatalf("holders = %+v, want the 2 tuples sink holds", tr.Holders)
	}
	for _, h := range tr.Holders {
		if h.Component != "sink" || h.Task != 3 || h.SourceComp != "fan" || h.SourceTask != 2 || h.FromLineage {
			t.Errorf("holder %+v, want sink task 3 holding a tuple from fan task 2, reported by the task", h)
		}
		if h.Since < tr.StartedAt || h.Since > tr.EndedAt || h.FoundAt < tr.EndedAt {
			t.Errorf("held since %d found %d, tree %d..%d", h.Since, h.FoundAt, tr.StartedAt, tr.EndedAt)
		}
	}
	// Completed unsampled trees are not kept.
	if _, ok := rec.Lookup("8"); ok {
		t.Error("message 8 completed unsampled but was kept")
	}
}

// TestLineageSampledTree: with every root sampled, the tree of root 7 has all its
// tuples: the spout's to fan (acked by task 2) and fan's two to sink, pending, held by
// task 3.
func TestLineageSampledTree(t *testing.T) {
	c := &testtopo.Counted{Roots: 20, Fanout: 2, SinkTasks: 1, DropAck: 7}
	rec := runCounted(t, c, 1)
	tr, ok := rec.Lookup("7")
	if !ok || !tr.Sampled || tr.Outcome != lineage.TimedOut {
		t.Fatalf("tree %+v found %v, want a sampled timed-out tree", tr, ok)
	}
	if len(tr.Nodes) != 3 {
		t.Fatalf("nodes = %+v, want 3", tr.Nodes)
	}
	root := tr.Nodes[0]
	if root.Component != "src" || root.ToComponent != "fan" || root.ToTask != 2 || len(root.Parents) != 0 ||
		root.State != lineage.NodeAcked || root.DoneByTask != 2 {
		t.Errorf("spout tuple %+v", root)
	}
	pending := map[uint64]bool{}
	for _, n := range tr.Nodes[1:] {
		if n.Component != "fan" || n.Task != 2 || n.ToComponent != "sink" || n.ToTask != 3 ||
			len(n.Parents) != 1 || n.Parents[0] != root.ID || n.State != lineage.NodePending {
			t.Errorf("fan tuple %+v, want pending from fan[2] to sink[3] anchored to %x", n, root.ID)
		}
		pending[n.ID] = true
	}
	if len(tr.Holders) != 2 {
		t.Fatalf("holders %+v", tr.Holders)
	}
	for _, h := range tr.Holders {
		if !pending[h.Node] || h.Task != 3 || h.FromLineage {
			t.Errorf("holder %+v: want a pending node held by task 3, as the task reported it", h)
		}
	}
	done, ok := rec.Lookup("8")
	if !ok || done.Outcome != lineage.Completed || len(done.Nodes) != 3 {
		t.Fatalf("tree 8: %+v", done)
	}
	for _, n := range done.Nodes {
		if n.State != lineage.NodeAcked {
			t.Errorf("tree 8 node %+v not acked", n)
		}
	}
}

// TestLineageFailPoint: an explicit fail in fan names fan's task, its input and the reason.
func TestLineageFailPoint(t *testing.T) {
	c := &testtopo.Counted{Roots: 40, Fanout: 1, FailEvery: 20, SinkTasks: 1, DropAck: -1}
	rec := runCounted(t, c, 0)
	got := rec.Recent(lineage.Failed, 10)
	if len(got) != 2 {
		t.Fatalf("recent failed = %+v, want roots of messages 0 and 20", got)
	}
	tr, ok := rec.Lookup("20")
	if !ok || tr.Outcome != lineage.Failed || len(tr.Fails) != 1 {
		t.Fatalf("tree 20 = %+v", tr)
	}
	f := tr.Fails[0]
	if f.Component != "fan" || f.Task != 2 || f.SourceComp != "src" || f.SourceTask != 1 ||
		!strings.Contains(f.Reason, "injected failure") || !strings.Contains(tr.Reason, "injected failure") {
		t.Errorf("fail point %+v reason %q", f, tr.Reason)
	}
}
