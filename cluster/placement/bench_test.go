package placement

import (
	"fmt"
	"testing"
)

// benchTopology is 10,000 tasks in five components, as a large word count.
func benchTopology() Topology {
	t := Topology{Name: "big"}
	id := 1
	for _, c := range []struct {
		name string
		n    int
	}{{"lines", 200}, {"split", 3900}, {"count", 3900}, {"sink", 1000}, {"__acker", 1000}} {
		for range c.n {
			t.Tasks = append(t.Tasks, Task{ID: id, Component: c.name})
			id++
		}
	}
	return t
}

func benchWorkers(n int) []Worker {
	ws := make([]Worker, n)
	for i := range ws {
		ws[i] = Worker{Name: fmt.Sprintf("w%03d", i), Slots: 4}
	}
	return ws
}

// BenchmarkPlace places 10,000 tasks on 100 workers: a new topology, the pass after
// one worker was lost (a spare takes its tasks), the pass after one was lost with
// no spare (its 100 tasks spread over 99), a rebalance from 50 workers to 100, and
// a pass where nothing changed.
func BenchmarkPlace(b *testing.B) {
	topo := benchTopology()
	workers := benchWorkers(101)
	first, err := Place(Input{Workers: workers[:100], Topology: topo, Want: 100})
	if err != nil {
		b.Fatal(err)
	}
	half, err := Place(Input{Workers: workers[:50], Topology: topo, Want: 50})
	if err != nil {
		b.Fatal(err)
	}
	occupied := Occupy(workers, first.Assignment)
	cases := []struct {
		name  string
		in    Input
		moves int
	}{
		{"new", Input{Workers: workers[:100], Topology: topo, Want: 100}, 0},
		{"lost-spare", Input{Workers: occupied[1:], Topology: topo, Current: first.Assignment}, 100},
		{"lost-no-spare", Input{Workers: occupied[1:100], Topology: topo, Current: first.Assignment}, 100},
		{"rebalance-50-100", Input{Workers: Occupy(workers[:100], half.Assignment), Topology: topo, Want: 100, Current: half.Assignment}, 5000},
		{"unchanged", Input{Workers: occupied[:100], Topology: topo, Current: first.Assignment}, 0},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var res Result
			for b.Loop() {
				res, err = Place(c.in)
				if err != nil {
					b.Fatal(err)
				}
			}
			if len(res.Moves) != c.moves {
				b.Fatalf("%d moves, want %d", len(res.Moves), c.moves)
			}
		})
	}
}
