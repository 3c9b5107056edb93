package engine

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
)

// A stop that comes before every host is up: the spout was never activated, so it
// is not deactivated either; a host that comes up afterwards activates nothing.
func TestNoActivateWhenStoppedBeforeTheHostsAreUp(t *testing.T) {
	var log callLog
	b := topology.NewBuilder()
	b.SetSpout("s", log.spout(3), 1).Output("id")
	b.SetBolt("h", ackAll, 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.Ackers = 1
	topo := mustBuild(t, b)
	as := mustSpread(t, topo, cfg, 2)
	tr := transport.NewLocal()
	spoutHost := -1
	ids, _ := TaskIDs(topo, cfg)
	for i, a := range as {
		if a.Of[ids["s"][0]] == a.Host {
			spoutHost = i
		}
	}
	if spoutHost < 0 {
		t.Fatal("no host has the spout")
	}
	first := start(t, topo, cfg, WithTransport(tr), WithAssignment(as[spoutHost]))
	waitfor.True(t, 10*time.Second, "the spout opened", func() bool { return slices.Contains(log.get(), "open") })
	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		stopped <- first.Stop(ctx)
	}()
	waitfor.True(t, 10*time.Second, "the stop to begin", func() bool { return first.stopping.Load() })
	other := start(t, topo, cfg, WithTransport(tr), WithAssignment(as[1-spoutHost]))
	if err := <-stopped; err != nil {
		t.Errorf("Stop: %v", err)
	}
	for _, rt := range []*Runtime{first, other} {
		select {
		case <-rt.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("a host still runs after the stop")
		}
	}
	if got, want := strings.Join(log.get(), " "), "open close"; got != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
}

// panicSpout's Activate panics.
type panicSpout struct{ activatingSpout }

func (s *panicSpout) Activate() { s.record("activate"); panic("activate") }

// An Activate that panics is reported, and the run goes on: NextTuple is called,
// and Deactivate still comes at the stop (Activate was called).
func TestActivatePanicIsReported(t *testing.T) {
	var log callLog
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout {
		return &panicSpout{activatingSpout{n: 3, mu: &log.mu, calls: &log.calls}}
	}, 1).Output("id")
	b.SetBolt("h", ackAll, 1).ShuffleGrouping("s")
	cfg := quietConfig()
	cfg.Ackers = 1
	rt := start(t, mustBuild(t, b), cfg)
	waitfor.True(t, 10*time.Second, "every tree acked", func() bool { return rt.Stats().Components["s"].Acked == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-rt.Done()
	// (NextTuple runs between the acks: only the frame is fixed.)
	if got := strings.Join(log.get(), " "); !strings.HasPrefix(got, "open activate next") || !strings.HasSuffix(got, " deactivate close") || strings.Count(got, "ack") != 3 {
		t.Fatalf("calls %q, want open activate next, the 3 acks, deactivate close", got)
	}
	if e := rt.Stats().Components["s"].Errors; e != 1 {
		t.Errorf("%d errors reported, want 1 (the panic)", e)
	}
}
