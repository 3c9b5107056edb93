package placement

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// randomTopology returns a topology of 1 to 4 components of 1 to 6 tasks each,
// numbered from 1.
func randomTopology(r *rand.Rand, name string) Topology {
	t := Topology{Name: name}
	id := 1
	for c := range 1 + r.IntN(4) {
		for range 1 + r.IntN(6) {
			t.Tasks = append(t.Tasks, Task{ID: id, Component: fmt.Sprintf("c%d", c)})
			id++
		}
	}
	return t
}

// TestPlaceProperties throws random clusters at Place, as a scheduler would meet
// them: workers join, leave and come back, topologies are rebalanced, dropped and
// submitted again, some with pins (to a dedicated "serve" worker or to an ordinary
// one). After every successful Place it checks the invariants (Check), determinism
// (the same Result on the input shuffled), rest (placing the result again changes
// nothing), the generation rule, that Moves are exactly the tasks whose worker
// changed, and that a failing Place fails for a reason the input gives.
func TestPlaceProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	trials, steps := 300, 30
	if testing.Short() {
		trials = 60
	}
	var places, changed, moved, short, replaced, failures int
	for trial := range trials {
		pool := []Worker{{Name: "serve", Slots: 2, Dedicated: true}}
		for i := range 2 + r.IntN(7) {
			pool = append(pool, Worker{Name: fmt.Sprintf("w%d", i), Slots: 1 + r.IntN(3)})
		}
		live := map[string]bool{}
		for _, w := range pool {
			live[w.Name] = r.IntN(4) > 0
		}
		topos := map[string]Topology{}
		for _, name := range []string{"a", "b"}[:1+r.IntN(2)] {
			tp := randomTopology(r, name)
			switch r.IntN(4) {
			case 0: // pinned to the dedicated worker, as gale serve's log spout
				tp.Pins = map[int]string{1: "serve"}
			case 1: // pinned to an ordinary worker
				tp.Pins = map[int]string{len(tp.Tasks): pool[1].Name}
			}
			topos[name] = tp
		}
		assigned := map[string]*Assignment{}
		liveWorkers := func() []Worker {
			var ws []Worker
			for _, w := range pool {
				if live[w.Name] {
					ws = append(ws, w)
				}
			}
			var as []*Assignment
			for _, name := range slices.Sorted(maps.Keys(assigned)) {
				as = append(as, assigned[name])
			}
			return Occupy(ws, as...)
		}
		for step := range steps {
			where := fmt.Sprintf("trial %d step %d", trial, step)
			w := pool[r.IntN(len(pool))].Name
			switch op := r.IntN(10); {
			case op < 3:
				live[w] = false
			case op < 6:
				live[w] = true
			case op < 7:
				name := slices.Sorted(maps.Keys(topos))[r.IntN(len(topos))]
				delete(assigned, name)
			}
			// The scheduler's pass: every topology, in name order; a rebalance
			// now and then.
			for _, name := range slices.Sorted(maps.Keys(topos)) {
				tp := topos[name]
				cur := assigned[name]
				want := 0
				if cur == nil || r.IntN(8) == 0 {
					want = 1 + r.IntN(5)
				}
				in := Input{Workers: liveWorkers(), Topology: tp, Want: want, Current: cur}
				res, err := Place(in)
				if err != nil {
					failures++
					checkFailure(t, where, in, err)
					continue
				}
				places++
				if checkResult(t, where, in, res, r) {
					replaced++
				}
				if res.Changed {
					changed++
				}
				moved += len(res.Moves)
				if res.Short > 0 {
					short++
				}
				assigned[name] = res.Assignment
				// At rest: the same pass again changes nothing.
				rest, err := Place(Input{Workers: liveWorkers(), Topology: tp, Current: res.Assignment})
				if err != nil || rest.Changed || rest.Moves != nil || !reflect.DeepEqual(rest.Assignment, res.Assignment) {
					t.Fatalf("%s: %s: placing the result again: %v %+v", where, name, err, rest)
				}
			}
		}
	}
	t.Logf("%d placements (%d changed, %d tasks moved, %d short, %d replacing lost workers), %d refused",
		places, changed, moved, short, replaced, failures)
	if places < trials*steps/2 || changed == 0 || moved == 0 || short == 0 || replaced == 0 || failures == 0 {
		t.Fatalf("the random cases missed some kinds: %d placements, %d changed, %d moved, %d short, %d replacing, %d refused",
			places, changed, moved, short, replaced, failures)
	}
}

// checkResult asserts what every successful Place must give.
// It reports whether the pass replaced lost workers with new ones.
func checkResult(t *testing.T, where string, in Input, res Result, r *rand.Rand) (replaced bool) {
	t.Helper()
	a := res.Assignment
	workers := Occupy(in.Workers, a) // a's own slot; others' from in's Runs
	for i := range workers {
		for _, run := range in.Workers[i].Runs {
			if run != a.Topology {
				workers[i].Runs = append(workers[i].Runs, run)
			}
		}
	}
	if err := Check(a, in.Topology, workers); err != nil {
		t.Fatalf("%s: %s: %v\ninput %+v\nresult %+v", where, in.Topology.Name, err, in, res)
	}
	again, err := Place(shuffled(in, r))
	if err != nil || !reflect.DeepEqual(again, res) {
		t.Fatalf("%s: shuffled input gave %v %+v, not %+v", where, err, again, res)
	}
	cur := in.Current
	if cur == nil {
		if !res.Changed || a.Generation != 1 || res.Moves != nil {
			t.Fatalf("%s: a new topology: changed=%v generation=%d moves=%v", where, res.Changed, a.Generation, res.Moves)
		}
		return false
	}
	var want []Move
	comp := map[int]string{}
	for _, task := range in.Topology.Tasks {
		comp[task.ID] = task.Component
	}
	for _, id := range slices.Sorted(maps.Keys(a.Of)) {
		if cur.Of[id] != a.Of[id] {
			want = append(want, Move{Task: id, Component: comp[id], From: cur.Of[id], To: a.Of[id]})
		}
	}
	if !reflect.DeepEqual(res.Moves, want) {
		t.Fatalf("%s: moves %v, but the tasks whose worker changed are %v", where, res.Moves, want)
	}
	if res.Changed != (len(want) > 0) {
		t.Fatalf("%s: changed=%v with %d moves", where, res.Changed, len(want))
	}
	gen := cur.Generation
	if res.Changed {
		gen++
	}
	if a.Generation != gen {
		t.Fatalf("%s: generation %d after %d (changed=%v)", where, a.Generation, cur.Generation, res.Changed)
	}
	// Fewest moves, where the answer is plain: a pass that keeps the wanted number
	// and the same live workers moves nothing; one where each lost worker is
	// replaced by a new one moves exactly the lost workers' tasks.
	if in.Want == 0 || in.Want == cur.Want {
		var lost, added []string
		onLost := 0
		for _, w := range cur.Workers {
			if !slices.ContainsFunc(in.Workers, func(l Worker) bool { return l.Name == w }) {
				lost = append(lost, w)
				onLost += len(cur.Tasks(w))
			}
		}
		for _, w := range a.Workers {
			if !slices.Contains(cur.Workers, w) {
				added = append(added, w)
			}
		}
		if len(lost) == len(added) && len(a.Workers) == len(cur.Workers) && len(want) != onLost {
			t.Fatalf("%s: lost %v, replaced by %v, yet %d tasks moved, not the %d on the lost: %v", where, lost, added, len(want), onLost, want)
		}
		return len(lost) > 0 && len(lost) == len(added) && len(a.Workers) == len(cur.Workers)
	}
	return false
}

// checkFailure asserts that a refusal is one the input explains.
func checkFailure(t *testing.T, where string, in Input, err error) {
	t.Helper()
	var se *SlotsError
	var pe *PinError
	switch {
	case errors.Is(err, ErrNoWorkers):
		if len(in.Workers) != 0 {
			t.Fatalf("%s: %v with %d live workers", where, err, len(in.Workers))
		}
	case errors.As(err, &se):
		if len(se.Free) >= se.Asked && len(se.Free) > 0 {
			t.Fatalf("%s: %v, yet %d are free for %d asked", where, err, len(se.Free), se.Asked)
		}
		strict := in.Current == nil || in.Want != 0 && in.Want != in.Current.Want
		if !strict && len(se.Free) > 0 {
			t.Fatalf("%s: a pass keeping the wanted number refused with free workers: %v", where, err)
		}
	case errors.As(err, &pe):
		if in.Topology.Pins[pe.Task] != pe.Worker {
			t.Fatalf("%s: %v, but task %d is pinned to %q", where, err, pe.Task, in.Topology.Pins[pe.Task])
		}
		isLive := slices.ContainsFunc(in.Workers, func(w Worker) bool { return w.Name == pe.Worker })
		if errors.Is(err, ErrWorkerNotLive) == isLive {
			t.Fatalf("%s: %v, but %q live=%v", where, err, pe.Worker, isLive)
		}
	case errors.Is(err, ErrPinsExceedWant):
	default:
		t.Fatalf("%s: unexpected error %v", where, err)
	}
}

// TestFewestMoves compares the tasks Place moves with the fewest that any placement
// on the same workers passing Check could move, found by trying every placement of
// small random topologies after a short history: a worker lost (replaced or not), a
// rebalance, or nothing. A third of them pin tasks to an ordinary worker.
func TestFewestMoves(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	trials := 3000
	if testing.Short() {
		trials = 500
	}
	cases, pinned := 0, 0
	for trial := range trials {
		topo := Topology{Name: "t"}
		n := 2 + r.IntN(5)
		ncomp := 1 + r.IntN(3)
		for id := 1; id <= n; id++ {
			topo.Tasks = append(topo.Tasks, Task{ID: id, Component: fmt.Sprintf("c%d", r.IntN(ncomp))})
		}
		if trial%3 == 0 {
			topo.Pins = map[int]string{}
			for range 1 + r.IntN(2) {
				topo.Pins[1+r.IntN(n)] = "w0"
			}
		}
		var workers []Worker
		for i := range 5 {
			workers = append(workers, Worker{Name: fmt.Sprintf("w%d", i), Slots: 1})
		}
		k := 1 + r.IntN(3)
		cur, err := Place(Input{Workers: workers[:k], Topology: topo, Want: k})
		if err != nil {
			t.Fatal(err)
		}
		live := Occupy(workers, cur.Assignment)
		for range r.IntN(3) {
			if res, err := Place(Input{Workers: live, Topology: topo, Want: 1 + r.IntN(4), Current: cur.Assignment}); err == nil {
				cur = res
				live = Occupy(workers, cur.Assignment)
			}
		}
		want := 0
		switch r.IntN(3) {
		case 0:
			lost := cur.Assignment.Workers[r.IntN(len(cur.Assignment.Workers))]
			live = slices.DeleteFunc(live, func(w Worker) bool { return w.Name == lost && lost != "w0" })
			if r.IntN(2) == 0 { // no spare
				live = slices.DeleteFunc(live, func(w Worker) bool { return len(w.Runs) == 0 })
			}
		case 1:
			want = 1 + r.IntN(4)
		}
		res, err := Place(Input{Workers: live, Topology: topo, Want: want, Current: cur.Assignment})
		if err != nil {
			continue
		}
		var valid func(of []int) bool
		if topo.Pins == nil {
			valid = evenOn(topo, len(res.Assignment.Workers))
		} else {
			if len(res.Assignment.Workers) > 3 {
				continue
			}
			pinned++
			valid = func(of []int) bool {
				a := &Assignment{Topology: "t", Generation: 1, Want: 1, Workers: res.Assignment.Workers, Of: map[int]string{}}
				for j, task := range topo.Tasks {
					a.Of[task.ID] = a.Workers[of[j]]
				}
				return Check(a, topo, Occupy(live, a)) == nil
			}
		}
		cases++
		best := fewestMoves(topo, cur.Assignment, res.Assignment.Workers, valid)
		if len(res.Moves) < best {
			t.Fatalf("trial %d: %d moves, fewer than the brute force's %d: the brute force is wrong", trial, len(res.Moves), best)
		}
		if len(res.Moves) > best {
			t.Errorf("trial %d: %d moves where %d would do\ntopology %v pins %v\nfrom %v\nto   %v",
				trial, len(res.Moves), best, topo.Tasks, topo.Pins, cur.Assignment.Of, res.Assignment.Of)
		}
	}
	t.Logf("%d cases (%d with pins) moved the fewest tasks possible", cases, pinned)
	if cases < trials/2 || pinned < trials/10 {
		t.Fatalf("too few cases: %d, %d with pins", cases, pinned)
	}
}

// evenOn returns whether a placement of topo's tasks (task i on worker of[i]) on nw
// workers is even without pins: every worker holds a task, and the totals and each
// component's tasks differ by at most one.
func evenOn(topo Topology, nw int) func(of []int) bool {
	comps := map[string]int{}
	for _, task := range topo.Tasks {
		if _, ok := comps[task.Component]; !ok {
			comps[task.Component] = len(comps)
		}
	}
	total := make([]int, nw)
	per := make([]int, nw*len(comps))
	return func(of []int) bool {
		clear(total)
		clear(per)
		for j, task := range topo.Tasks {
			total[of[j]]++
			per[of[j]*len(comps)+comps[task.Component]]++
		}
		if slices.Min(total) == 0 || slices.Max(total)-slices.Min(total) > 1 {
			return false
		}
		for c := range len(comps) {
			lo, hi := per[c], per[c]
			for w := range nw {
				lo, hi = min(lo, per[w*len(comps)+c]), max(hi, per[w*len(comps)+c])
			}
			if hi-lo > 1 {
				return false
			}
		}
		return true
	}
}

// fewestMoves tries every placement of topo's tasks on workers that valid accepts
// and returns the fewest tasks whose worker differs from cur.
func fewestMoves(topo Topology, cur *Assignment, workers []string, valid func(of []int) bool) int {
	n := len(topo.Tasks)
	of := make([]int, n)
	best := n + 1
	var walk func(i, moves int)
	walk = func(i, moves int) {
		if moves >= best {
			return
		}
		if i == n {
			if valid(of) {
				best = moves
			}
			return
		}
		for w := range workers {
			of[i] = w
			m := moves
			if cur.Of[topo.Tasks[i].ID] != workers[w] {
				m++
			}
			walk(i+1, m)
		}
	}
	walk(0, 0)
	return best
}
