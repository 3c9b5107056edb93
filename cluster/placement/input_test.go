package placement

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func wc() Topology {
	return Topology{Name: "wc", Tasks: []Task{{1, "lines"}, {2, "split"}, {3, "split"}, {4, "count"}, {5, "count"}}}
}

func threeWorkers() []Worker {
	return []Worker{{Name: "a", Slots: 1}, {Name: "b", Slots: 1}, {Name: "c", Slots: 1}}
}

// TestInputErrors covers the malformed inputs the scripts cannot write: each is an
// *InputError matching ErrInvalid, naming what is wrong.
func TestInputErrors(t *testing.T) {
	cur, err := Place(Input{Workers: threeWorkers(), Topology: wc(), Want: 2})
	if err != nil {
		t.Fatal(err)
	}
	other := cur.Assignment.Clone()
	other.Topology = "orders"
	fewer := cur.Assignment.Clone()
	delete(fewer.Of, 5)
	fewer.Of[9] = "a"
	cases := []struct {
		name string
		in   Input
		want string
	}{
		{"no name", Input{Workers: threeWorkers(), Topology: Topology{Tasks: wc().Tasks}, Want: 1}, "the topology has no name"},
		{"no component", Input{Workers: threeWorkers(), Topology: Topology{Name: "x", Tasks: []Task{{1, ""}}}, Want: 1}, `topology "x": task 1 has no component`},
		{"pin to nobody", Input{Workers: threeWorkers(), Topology: Topology{Name: "x", Tasks: []Task{{1, "s"}}, Pins: map[int]string{1: ""}}, Want: 1}, "pinned to a worker with no name"},
		{"worker without a name", Input{Workers: []Worker{{Slots: 1}}, Topology: wc(), Want: 1}, "a worker has no name"},
		{"two workers of a name", Input{Workers: []Worker{{Name: "a", Slots: 1}, {Name: "a", Slots: 2}}, Topology: wc(), Want: 1}, `two live workers are named "a"`},
		{"negative slots", Input{Workers: []Worker{{Name: "a", Slots: -1}}, Topology: wc(), Want: 1}, `worker "a" has -1 slots`},
		{"another topology's assignment", Input{Workers: threeWorkers(), Topology: wc(), Current: other}, `the current assignment is of topology "orders", not "wc"`},
		{"other tasks", Input{Workers: threeWorkers(), Topology: wc(), Current: fewer}, `the current assignment of "wc" leaves out task 5 and places task 9, which the topology does not have`},
	}
	for _, c := range cases {
		_, err := Place(c.in)
		var ie *InputError
		if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an *InputError saying %q", c.name, err, c.want)
		}
	}
}

// TestErrorValues checks the fields of the typed errors, which a caller (gale submit,
// the UI) shows or acts on.
func TestErrorValues(t *testing.T) {
	workers := []Worker{{Name: "a", Slots: 1, Runs: []string{"other"}}, {Name: "b", Slots: 2}, {Name: "serve", Slots: 1, Dedicated: true}}
	_, err := Place(Input{Workers: workers, Topology: wc(), Want: 3})
	var se *SlotsError
	if !errors.As(err, &se) || !errors.Is(err, ErrNoFreeSlots) {
		t.Fatalf("got %v, want a *SlotsError", err)
	}
	want := &SlotsError{Topology: "wc", Asked: 3, Free: []string{"b"}, Full: []FullWorker{{Name: "a", Slots: 1, Runs: []string{"other"}}}}
	if !reflect.DeepEqual(se, want) {
		t.Fatalf("got %+v, want %+v", se, want)
	}
	if got := err.Error(); got != `placement: topology "wc" asks for 3 workers, but 1 live worker has a free slot for it (b); a is full (its 1 slot runs other)` {
		t.Fatalf("message %q", got)
	}
	pinned := wc()
	pinned.Pins = map[int]string{4: "a", 1: "gone"}
	_, err = Place(Input{Workers: workers, Topology: pinned, Want: 2})
	var pe *PinError
	if !errors.As(err, &pe) || !errors.Is(err, ErrWorkerNotLive) || pe.Task != 1 || pe.Worker != "gone" {
		t.Fatalf("got %v, want a *PinError for task 1 on gone", err)
	}
	pinned.Pins = map[int]string{4: "a"}
	_, err = Place(Input{Workers: workers, Topology: pinned, Want: 2})
	if !errors.As(err, &pe) || !errors.Is(err, ErrNoFreeSlots) || pe.Task != 4 || pe.Worker != "a" || !slices.Equal(pe.Runs, []string{"other"}) {
		t.Fatalf("got %v, want a *PinError for task 4 on a, full", err)
	}
	_, err = Place(Input{Topology: wc(), Want: 1})
	if !errors.Is(err, ErrNoWorkers) {
		t.Fatalf("got %v, want ErrNoWorkers", err)
	}
}

// TestWantZeroKeepsCurrent: Want 0 is the scheduler's pass, keeping the wanted
// number; a degraded topology stays placed (Short) rather than refused, while the
// same shortage on a rebalance (a new Want) is refused.
func TestWantZeroKeepsCurrent(t *testing.T) {
	first, err := Place(Input{Workers: threeWorkers(), Topology: wc(), Want: 3})
	if err != nil {
		t.Fatal(err)
	}
	two := Occupy(threeWorkers()[:2], first.Assignment)
	res, err := Place(Input{Workers: two, Topology: wc(), Current: first.Assignment})
	if err != nil {
		t.Fatal(err)
	}
	if res.Assignment.Want != 3 || res.Short != 1 || len(res.Assignment.Workers) != 2 || res.Assignment.Generation != 2 {
		t.Fatalf("got %+v (short %d), want 2 workers of 3, generation 2", res.Assignment, res.Short)
	}
	if _, err := Place(Input{Workers: two, Topology: wc(), Want: 4, Current: first.Assignment}); !errors.Is(err, ErrNoFreeSlots) {
		t.Fatalf("a rebalance to 4 on 2 workers: got %v, want ErrNoFreeSlots", err)
	}
	// Current is not modified.
	if first.Assignment.Generation != 1 || len(first.Assignment.Workers) != 3 {
		t.Fatalf("Place modified Current: %+v", first.Assignment)
	}
}

func TestAssignmentHelpers(t *testing.T) {
	a := &Assignment{Topology: "t", Generation: 3, Want: 2, Workers: []string{"a", "b"}, Of: map[int]string{1: "a", 2: "b", 3: "a"}}
	if got := a.Tasks("a"); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("Tasks(a) = %v", got)
	}
	c := a.Clone()
	c.Of[1] = "b"
	c.Workers[0] = "z"
	if a.Of[1] != "a" || a.Workers[0] != "a" {
		t.Fatal("Clone shares its maps or slices")
	}
	ws := Occupy([]Worker{{Name: "a", Slots: 2, Runs: []string{"stale"}}, {Name: "b", Slots: 1}, {Name: "c", Slots: 1}}, a,
		&Assignment{Topology: "s", Workers: []string{"a"}})
	if !slices.Equal(ws[0].Runs, []string{"s", "t"}) || !slices.Equal(ws[1].Runs, []string{"t"}) || ws[2].Runs != nil {
		t.Fatalf("Occupy: %+v", ws)
	}
}

// TestCheckFindsBreaches feeds Check broken assignments: each breach is reported.
func TestCheckFindsBreaches(t *testing.T) {
	topo := wc()
	topo.Pins = map[int]string{1: "a"}
	workers := Occupy(threeWorkers(), &Assignment{Topology: "wc", Workers: []string{"a", "b"}})
	good := &Assignment{Topology: "wc", Generation: 1, Want: 2, Workers: []string{"a", "b"}, Of: map[int]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "a"}}
	if err := Check(good, topo, workers); err != nil {
		t.Fatalf("a good assignment: %v", err)
	}
	cases := []struct {
		name   string
		break_ func(a *Assignment, ws []Worker) []Worker
		want   string
	}{
		{"unplaced", func(a *Assignment, ws []Worker) []Worker { delete(a.Of, 3); return ws }, "task 3 is not placed"},
		{"unknown task", func(a *Assignment, ws []Worker) []Worker { a.Of[7] = "a"; return ws }, "task 7 is placed but the topology has no such task"},
		{"not chosen", func(a *Assignment, ws []Worker) []Worker { a.Of[3] = "c"; return ws }, `worker "c" holds tasks but is not among the chosen workers`},
		{"idle", func(a *Assignment, ws []Worker) []Worker { a.Workers = []string{"a", "b", "c"}; return ws }, `worker "c" is chosen but holds no task`},
		{"unsorted", func(a *Assignment, ws []Worker) []Worker { a.Workers = []string{"b", "a"}; return ws }, "are not sorted and distinct"},
		{"dead", func(a *Assignment, ws []Worker) []Worker { return ws[:1] }, `worker "b" holds tasks [3 4] but is not live`},
		{"full", func(a *Assignment, ws []Worker) []Worker { ws[1].Runs = append(ws[1].Runs, "etl"); return ws }, `worker "b" has 1 slot, taken by etl, which comes before "wc" by name`},
		{"drained", func(a *Assignment, ws []Worker) []Worker { ws[1].Slots = 0; return ws }, `worker "b" has no slots`},
		{"pin", func(a *Assignment, ws []Worker) []Worker { a.Of[1], a.Of[3] = "b", "a"; return ws }, `task 1 is pinned to "a" but placed on "b"`},
		{"dedicated", func(a *Assignment, ws []Worker) []Worker { ws[1].Dedicated = true; return ws }, `task 3 is on dedicated worker "b" but not pinned there`},
		{"uneven", func(a *Assignment, ws []Worker) []Worker { a.Of[3] = "a"; return ws }, `worker "a" holds 4 tasks, some not pinned, and another holds 1`},
		{"generation", func(a *Assignment, ws []Worker) []Worker { a.Generation = 0; return ws }, "generation 0"},
	}
	for _, c := range cases {
		a := good.Clone()
		ws := c.break_(a, slices.Clone(workers))
		err := Check(a, topo, ws)
		if !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	// A worker with fewer slots than the topologies it runs keeps the first ones by
	// name: wc keeps b's only slot from x, which loses it.
	ws := slices.Clone(workers)
	ws[1].Runs = []string{"wc", "x"}
	if err := Check(good, topo, ws); err != nil {
		t.Fatalf("wc, before x by name, lost b's slot: %v", err)
	}
	// Per component, without pins: even totals, yet split all on one worker.
	topo.Pins = nil
	a := &Assignment{Topology: "wc", Generation: 1, Want: 2, Workers: []string{"a", "b"}, Of: map[int]string{1: "a", 2: "a", 3: "b", 4: "a", 5: "b"}}
	if err := Check(a, topo, workers); err != nil {
		t.Fatalf("even: %v", err)
	}
	a.Of[3], a.Of[4] = "a", "b" // a: lines, split, split; b: count, count
	if err := Check(a, topo, workers); !errors.Is(err, ErrInvariant) || !strings.Contains(err.Error(), `component "split"`) {
		t.Fatalf("split on one worker: %v", err)
	}
}
