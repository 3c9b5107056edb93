package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// shape builds a small word-count-like topology; change alters one thing.
func shape(t *testing.T, change string) (*topology.Topology, topology.Config) {
	t.Helper()
	b := topology.NewBuilder()
	par := 2
	if change == "parallelism" {
		par = 3
	}
	b.SetSpout("lines", func() topology.Spout { return &nopSpout{} }, 1).Output("line", "pos")
	split := b.SetBasicBolt("split", func() topology.BasicBolt { return &nopBolt{} }, par)
	if change == "fields" {
		split.Output("word", "pos")
	} else {
		split.Output("word", "pos", "off")
	}
	split.ShuffleGrouping("lines")
	count := b.SetBasicBolt("count", func() topology.BasicBolt { return &nopBolt{} }, 2)
	if change == "grouping" {
		count.ShuffleGrouping("split")
	} else {
		count.FieldsGrouping("split", "word")
	}
	if change == "tick" {
		count.TickEvery(time.Second)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	switch change {
	case "ackers":
		cfg.Ackers = 2
	case "timeout":
		cfg.MessageTimeout = time.Minute
	case "batch":
		cfg.BatchSize = 64
	case "logger-only":
		cfg.LatencyMetrics = false
		cfg.ShutdownTimeout = time.Minute
	}
	return topo, cfg
}

func TestFingerprintIsTheSameForTheSameTopology(t *testing.T) {
	a := fp(t, "")
	b := fp(t, "")
	if a != b {
		t.Fatalf("two builds of one topology: %v and %v", a, b)
	}
	if err := Check(a, b); err != nil {
		t.Fatal(err)
	}
	if a.Codec != codec.Version || len(a.Shape) != 32 {
		t.Fatalf("fingerprint %+v: want codec v%d and a 32-digit shape", a, codec.Version)
	}
	// Settings that stay in one process do not change it.
	if c := fp(t, "logger-only"); c.Shape != a.Shape {
		t.Fatalf("latency metrics and shutdown timeout changed the shape: %s vs %s", c.Shape, a.Shape)
	}
}

// The shape of a fixed topology is pinned: a change to the canonical text makes a
// release unable to run beside the one before, and must be deliberate.
func TestFingerprintShapeIsPinned(t *testing.T) {
	const want = "36c59ee4e6f1747b0f68e5cde8b6ac08"
	if got := fp(t, "").Shape; got != want {
		t.Fatalf("shape of the test topology is %s, pinned %s:\n%s", got, want, describe(shape(t, "")))
	}
}

func TestFingerprintChangesWithWhatProcessesMustShare(t *testing.T) {
	base := fp(t, "")
	for _, change := range []string{"parallelism", "fields", "grouping", "tick", "ackers", "timeout", "batch"} {
		f := fp(t, change)
		if f.Shape == base.Shape {
			t.Errorf("changing the %s left the shape at %s", change, f.Shape)
		}
		err := Check(base, f)
		if !errors.Is(err, ErrFingerprint) || !strings.Contains(err.Error(), "shape "+base.Shape+", this build has "+f.Shape) {
			t.Errorf("changing the %s: Check = %v", change, err)
		}
	}
}

func TestCheckNamesEveryDifference(t *testing.T) {
	want := fp(t, "")
	have := want
	have.Topology, have.Codec, have.Module = "orders", want.Codec+1, "v9.9.9"
	err := Check(want, have)
	for _, s := range []string{`topology "wc", this build has "orders"`, fmt.Sprintf("codec v%d, this build has v%d", want.Codec, want.Codec+1)} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Check = %v, want it to say %q", err, s)
		}
	}
	have = want
	have.Module = "v9.9.9" // another build of the same topology code runs beside it
	if err := Check(want, have); err != nil {
		t.Fatalf("a different module version alone: %v", err)
	}
}

func fp(t *testing.T, change string) Fingerprint {
	topo, cfg := shape(t, change)
	return FingerprintOf("wc", topo, cfg)
}

type nopSpout struct{ topology.BaseSpout }

func (nopSpout) NextTuple() {}

type nopBolt struct{ topology.BaseBasicBolt }

func (nopBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }
