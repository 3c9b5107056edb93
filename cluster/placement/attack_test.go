package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Attacks on Place that found nothing: each test pins what held.

// Random inputs a scheduler could pass by mistake or meet in a messy cluster:
// workers of 0 to 2 slots, some dedicated, Runs with repeats and other topologies,
// pins to any worker (dedicated or not, live or not), any Want (0 included), and a
// Current placed earlier on a cluster of other slots and dedications (so workers
// that came back with fewer slots than they run). Every success passes Check, and
// is the same with every slice reversed or shuffled.
func TestPlaceOnMessyInputsHeld(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	trials := 20000
	if testing.Short() {
		trials = 2000
	}
	placed := 0
	for trial := range trials {
		var pool []Worker
		for i := range 1 + r.IntN(5) {
			pool = append(pool, Worker{Name: fmt.Sprintf("w%d", i), Slots: r.IntN(3), Dedicated: r.IntN(5) == 0})
		}
		tp := randomTopology(r, "a")
		if r.IntN(3) == 0 {
			tp.Pins = map[int]string{}
			for range 1 + r.IntN(3) {
				tp.Pins[tp.Tasks[r.IntN(len(tp.Tasks))].ID] = pool[r.IntN(len(pool))].Name
			}
		}
		var cur *Assignment
		if r.IntN(2) == 0 {
			prev := slices.Clone(pool)
			for i := range prev {
				prev[i].Slots = 1 + r.IntN(3)
				prev[i].Dedicated = r.IntN(6) == 0
			}
			ptp := tp
			if r.IntN(2) == 0 {
				ptp.Pins = nil
			}
			res, err := Place(Input{Workers: prev, Topology: ptp, Want: 1 + r.IntN(5)})
			if err != nil {
				continue
			}
			cur = res.Assignment
		}
		for i := range pool {
			for range r.IntN(3) {
				pool[i].Runs = append(pool[i].Runs, fmt.Sprintf("o%d", r.IntN(3)))
			}
		}
		in := Input{Workers: pool, Topology: tp, Want: r.IntN(5), Current: cur}
		if cur != nil {
			ws := Occupy(pool, cur)
			for i := range ws {
				ws[i].Runs = append(ws[i].Runs, pool[i].Runs...)
			}
			in.Workers = ws
		}
		res, err := Place(in)
		if err != nil {
			continue
		}
		placed++
		ws := Occupy(in.Workers, res.Assignment)
		for i := range ws {
			for _, run := range in.Workers[i].Runs {
				if run != "a" {
					ws[i].Runs = append(ws[i].Runs, run)
				}
			}
		}
		if err := Check(res.Assignment, tp, ws); err != nil {
			t.Fatalf("trial %d: %v\ninput %+v\nresult %+v", trial, err, in, res.Assignment)
		}
		in2 := in
		in2.Workers = slices.Clone(in.Workers)
		r.Shuffle(len(in2.Workers), func(i, j int) { in2.Workers[i], in2.Workers[j] = in2.Workers[j], in2.Workers[i] })
		for i := range in2.Workers {
			in2.Workers[i].Runs = slices.Clone(in2.Workers[i].Runs)
			slices.Reverse(in2.Workers[i].Runs)
		}
		in2.Topology.Tasks = slices.Clone(tp.Tasks)
		slices.Reverse(in2.Topology.Tasks)
		if res2, err := Place(in2); err != nil || !reflect.DeepEqual(res, res2) {
			t.Fatalf("trial %d: shuffled input gave %v %+v, not %+v", trial, err, res2, res)
		}
	}
	if placed < trials/10 {
		t.Fatalf("only %d of %d trials placed: the generator is off", placed, trials)
	}
}

// Want beyond the tasks: a two-task topology asking for 5 workers takes 2, is not
// short, and a worker joining later changes nothing; with one worker left it is
// short by 1 (of the 2 it can use), not 4.
func TestWantBeyondTasksHeld(t *testing.T) {
	tp := Topology{Name: "t", Tasks: []Task{{1, "a"}, {2, "b"}}}
	first, err := Place(Input{Workers: threeWorkers(), Topology: tp, Want: 5})
	if err != nil {
		t.Fatal(err)
	}
	if a := first.Assignment; a.Want != 5 || len(a.Workers) != 2 || first.Short != 0 {
		t.Fatalf("first: %+v short %d", a, first.Short)
	}
	more := append(threeWorkers(), Worker{Name: "d", Slots: 1})
	again, err := Place(Input{Workers: Occupy(more, first.Assignment), Topology: tp, Current: first.Assignment})
	if err != nil || again.Changed || again.Assignment.Generation != 1 {
		t.Fatalf("a worker joined: %v changed=%v %+v", err, again.Changed, again.Assignment)
	}
	one, err := Place(Input{Workers: Occupy(threeWorkers()[:1], first.Assignment), Topology: tp, Current: first.Assignment})
	if err != nil || one.Short != 1 || len(one.Assignment.Workers) != 1 {
		t.Fatalf("one worker left: %v short %d %+v", err, one.Short, one.Assignment)
	}
}
