package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// startHosts starts topo as one engine per assignment of Spread(n), on one
// transport, and stops them all at the test's end.
func startHosts(t *testing.T, topo *topology.Topology, cfg topology.Config, n int, tr transport.Transport) []*Runtime {
	t.Helper()
	var rts []*Runtime
	for _, a := range mustSpread(t, topo, cfg, n) {
		rts = append(rts, start(t, topo, cfg, WithTransport(tr), WithAssignment(a)))
	}
	return rts
}

// Three engines each host a third of the tasks; Stop called on one of them stops
// them all (the stop travels as a message), and ClusterStats asked of one host
// gathers every host's counters by message.
func TestStopAndStatsTravelBetweenHosts(t *testing.T) {
	rec := newRecorder()
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: rec, n: 1000} }, 3).Output("id")
	b.SetBolt("pass", passOn, 3).ShuffleGrouping("s").Output("id")
	b.SetBolt("sink", ackAll, 3).FieldsGrouping("pass", "id")
	cfg := quietConfig()
	cfg.Ackers = 3
	rts := startHosts(t, mustBuild(t, b), cfg, 3, transport.NewLocal())
	for i, rt := range rts {
		if got := len(rt.Stats().Components["pass"].ByTask); got != 1 {
			t.Fatalf("host %d hosts %d pass tasks, want 1", i+1, got)
		}
	}
	rec.waitFor(t, "every tree acked", func(a, f int) bool { return a == 3000 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var s Stats
	for { // counters are as of each task's last flush: ask until every ack is in
		var err error
		if s, err = rts[1].ClusterStats(ctx); err != nil {
			t.Fatal(err)
		}
		if s.Components["sink"].Acked == 3000 || ctx.Err() != nil {
			break
		}
	}
	if sp, sk := s.Components["s"], s.Components["sink"]; sp.Acked != 3000 || len(sp.ByTask) != 3 || sk.Acked != 3000 || s.Acker.Tasks != 3 || s.Acker.Completed != 3000 {
		t.Fatalf("cluster stats: spout acked %d over %d tasks, sink acked %d, %d ackers completed %d", sp.Acked, len(sp.ByTask), sk.Acked, s.Acker.Tasks, s.Acker.Completed)
	}
	if err := rts[1].Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i, rt := range rts {
		select {
		case <-rt.Done():
		case <-ctx.Done():
			t.Fatalf("host %d still running after host 2 stopped", i+1)
		}
	}
}

// An assignment must place every task on a host.
func TestAssignmentMustPlaceEveryTask(t *testing.T) {
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return &listSpout{rec: newRecorder()} }, 1).Output("id")
	b.SetBolt("b", ackAll, 2).ShuffleGrouping("s")
	topo := mustBuild(t, b)
	cfg := quietConfig()
	a := mustSpread(t, topo, cfg, 2)[0]
	of := map[int]int{}
	for k, v := range a.Of {
		of[k] = v
	}
	delete(of, 3)
	_, err := Start(context.Background(), topo, cfg, WithAssignment(Assignment{Host: 1, Of: of}))
	if !errors.Is(err, topology.ErrConfig) || !strings.Contains(err.Error(), "task 3") {
		t.Fatalf("assignment without task 3: %v", err)
	}
}

func mustSpread(t *testing.T, topo *topology.Topology, cfg topology.Config, n int) []Assignment {
	t.Helper()
	as, err := Spread(topo, cfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// notEncodable is a value the codec has no encoding for.
type notEncodable struct{ n int }

// With WithSerialization an emit whose value cannot cross the codec fails at once,
// naming the field and the type: before, Emit returned nil and the batch was refused
// at send (logged, and the tree left to time out).
func TestUnencodableValueFailsTheEmit(t *testing.T) {
	got := make(chan error, 1)
	calls := 0
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &fnSpout{rec: newRecorder(), next: func(out topology.SpoutCollector) {
			if calls++; calls == 1 {
				got <- out.Emit(tuple.Values{notEncodable{1}}, 1)
			}
		}}
	}, 1).Output("v")
	b.SetBolt("b", ackAll, 1).ShuffleGrouping("s")
	start(t, mustBuild(t, b), quietConfig())
	err := <-got
	if !errors.Is(err, codec.ErrUnencodable) || !strings.Contains(err.Error(), `"v"`) || !strings.Contains(err.Error(), "notEncodable") {
		t.Fatalf("Emit of an unencodable value = %v, want ErrUnencodable naming field v and its type", err)
	}
}
