package cluster

import (
	"testing"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// firstTask and lastTask are two custom groupings: the same kind, opposite routes.
type firstTask struct{ targets []int }

func (g *firstTask) Prepare(_ *tuple.Source, targets []int) error { g.targets = targets; return nil }
func (g *firstTask) ChooseTasks(_ tuple.Values, dst []int) []int  { return append(dst, g.targets[0]) }

type lastTask struct{ targets []int }

func (g *lastTask) Prepare(_ *tuple.Source, targets []int) error { g.targets = targets; return nil }
func (g *lastTask) ChooseTasks(_ tuple.Values, dst []int) []int {
	return append(dst, g.targets[len(g.targets)-1])
}

// Two topologies whose only difference is which custom grouping routes an
// edge (every tuple to the first task, or to the last) get the same Shape, so a
// worker built with one accepts an assignment submitted with the other, and the
// two processes would route the edge differently. describe once wrote an
// input's grouping as its kind ("custom") and fields only; the grouping's type
// (fmt %T of what the factory returns, or the factory's function name) is not in
// the text. Now the type is.
func TestCustomGroupingsOfDifferentTypesDiffer(t *testing.T) {
	build := func(g func() topology.CustomGrouping) Fingerprint {
		b := topology.NewBuilder()
		b.SetSpout("lines", func() topology.Spout { return &nopSpout{} }, 1).Output("line")
		b.SetBasicBolt("count", func() topology.BasicBolt { return &nopBolt{} }, 4).
			CustomGrouping("lines", tuple.DefaultStream, g)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		return FingerprintOf("wc", topo, topology.DefaultConfig())
	}
	first := build(func() topology.CustomGrouping { return &firstTask{} })
	last := build(func() topology.CustomGrouping { return &lastTask{} })
	if first.Shape == last.Shape {
		t.Fatalf("custom groupings *firstTask and *lastTask give one shape %s: Check passes, routes differ", first.Shape)
	}
}
