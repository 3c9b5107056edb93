package engine_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/testtopo"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
)

// The sink runs on host 2 and keeps root 7's tuples without acking them; the spout
// and its lineage are on host 1. When the tree times out, host 1 tells host 2 by
// message, host 2's sink task reports what it holds, and the report comes back by
// message: host 1's lineage names the task on the other host.
func TestLineageNamesAHolderOnAnotherHost(t *testing.T) {
	c := &testtopo.Counted{Roots: 50, Fanout: 2, SinkTasks: 1, DropAck: 7}
	topo, err := c.Topology()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.MessageTimeout = 200 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Minute
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	// Tasks: src 1, fan 2, sink 3, acker 4.
	of := map[int]int{1: 1, 2: 1, 3: 2, 4: 1}
	tr := transport.NewLocal()
	recs := make([]*lineage.Recorder, 2)
	rts := make([]*engine.Runtime, 2)
	for i := range rts {
		lc := lineage.DefaultConfig()
		lc.Sample = 0
		if recs[i], err = lineage.New(lc); err != nil {
			t.Fatal(err)
		}
		rts[i], err = engine.Start(context.Background(), topo, cfg, engine.WithTransport(tr),
			engine.WithAssignment(engine.Assignment{Host: i + 1, Of: of}), engine.WithLineage(recs[i]), engine.WithSerialization())
		if err != nil {
			t.Fatal(err)
		}
	}
	// Host 1 stops first and finishes; host 2's stop then must not wait for host 1
	// to acknowledge the stop it tells it of (it did, until its shutdown timeout).
	defer func() {
		for i, rt := range rts {
			stopped := make(chan error, 1)
			go func() { stopped <- rt.Stop(context.Background()) }()
			select {
			case err := <-stopped:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("host %d still stopping after 20 s (its shutdown timeout is 5 min)", i+1)
			}
			<-rt.Done()
		}
	}()
	tree := waitTree(t, recs[0], "7", func(tr lineage.Tree) bool { return len(tr.Holders) >= 2 })
	if tree.Outcome != lineage.TimedOut || tree.SpoutTask != 1 {
		t.Fatalf("outcome %s spout task %d", tree.Outcome, tree.SpoutTask)
	}
	for _, h := range tree.Holders {
		if h.Component != "sink" || h.Task != 3 || h.SourceComp != "fan" || h.SourceTask != 2 || h.FromLineage {
			t.Errorf("holder %+v, want sink task 3 (host 2) holding a tuple from fan task 2", h)
		}
	}
	if _, ok := recs[1].Lookup("7"); ok {
		t.Error("host 2 keeps root 7's lineage: it belongs to the spout's host")
	}
}
