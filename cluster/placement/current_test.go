package placement

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// A worker that comes back with fewer slots than the topologies it runs keeps the
// first ones by name; the others lose their slot there and move to a worker with a
// free slot, and what Place returns passes Check. (It used to keep every topology
// it held, whatever its slots, and fail its own Check: "worker "b" has 0 slots,
// used by  and "wc"".)
func TestWorkerBackWithFewerSlotsKeepsTheFirstTopologiesByName(t *testing.T) {
	first, err := Place(Input{Workers: threeWorkers(), Topology: wc(), Want: 2})
	if err != nil {
		t.Fatal(err)
	}
	cur := first.Assignment // on a and b
	ws := threeWorkers()
	ws[1].Slots = 0 // b comes back with no slots: drained
	res, err := Place(Input{Workers: Occupy(ws, cur), Topology: wc(), Current: cur})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Assignment.Workers, []string{"a", "c"}) || len(res.Moves) != len(cur.Tasks("b")) {
		t.Fatalf("drained b: got %v (moves %v), want b's tasks, only them, on c", res.Assignment.Workers, res.Moves)
	}
	if err := Check(res.Assignment, wc(), Occupy(ws, res.Assignment)); err != nil {
		t.Fatalf("Place gave %v (moves %v), which its own Check refuses: %v", res.Assignment.Workers, res.Moves, err)
	}

	// b had two slots, running wc and zz, and comes back with one: wc keeps it,
	// zz leaves, and Check agrees for both, before and after.
	zz := Topology{Name: "zz", Tasks: []Task{{1, "s"}, {2, "s"}}}
	ws = threeWorkers()
	ws[1].Slots = 2
	z, err := Place(Input{Workers: Occupy(ws, cur), Topology: zz, Want: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(z.Assignment.Workers, "b") {
		t.Fatalf("zz on %v, want b among them", z.Assignment.Workers)
	}
	ws[1].Slots = 1
	live := Occupy(ws, cur, z.Assignment)
	if err := Check(cur, wc(), live); err != nil {
		t.Fatalf("wc, first by name, lost b's slot: %v", err)
	}
	if err := Check(z.Assignment, zz, live); err == nil {
		t.Fatal("zz kept b's only slot, which wc holds")
	}
	kept, err := Place(Input{Workers: live, Topology: wc(), Current: cur})
	if err != nil || kept.Changed {
		t.Fatalf("wc moved: %v %+v", err, kept)
	}
	moved, err := Place(Input{Workers: live, Topology: zz, Current: z.Assignment})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(moved.Assignment.Workers, "b") {
		t.Fatalf("zz kept b: %v", moved.Assignment.Workers)
	}
	if err := Check(moved.Assignment, zz, Occupy(ws, cur, moved.Assignment)); err != nil {
		t.Fatalf("zz moved off b: %v", err)
	}
}

// A Current of generation 0 (Place never returns one) is refused as malformed: kept,
// it came back with generation 0 when nothing moved, which Check refuses and no
// frame could be fenced by.
func TestCurrentOfGenerationZeroIsRefused(t *testing.T) {
	first, err := Place(Input{Workers: threeWorkers(), Topology: wc(), Want: 2})
	if err != nil {
		t.Fatal(err)
	}
	cur := first.Assignment.Clone()
	cur.Generation = 0
	_, err = Place(Input{Workers: Occupy(threeWorkers(), cur), Topology: wc(), Current: cur})
	var ie *InputError
	if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `the current assignment of "wc" has generation 0`) {
		t.Fatalf("got %v, want an *InputError naming the generation", err)
	}
}

// A malformed Current is refused with an error naming what is wrong: a Want of -2
// (not "0 workers ... it has none", as if there were no Current), a task on a
// worker with no name (not "leaves out task 3", as if it were missing).
func TestMalformedCurrentErrorsNameWhatIsWrong(t *testing.T) {
	first, err := Place(Input{Workers: threeWorkers(), Topology: wc(), Want: 2})
	if err != nil {
		t.Fatal(err)
	}
	neg := first.Assignment.Clone()
	neg.Want = -2
	zero := first.Assignment.Clone()
	zero.Want = 0
	empty := first.Assignment.Clone()
	empty.Of[3] = ""
	both := empty.Clone()
	delete(both.Of, 5)
	for _, c := range []struct {
		name string
		cur  *Assignment
		want string
	}{
		{"negative Want in Current", neg, `the current assignment of "wc" asks for -2 workers: at least 1 is needed`},
		{"Want 0 in Current", zero, `the current assignment of "wc" asks for 0 workers: at least 1 is needed`},
		{"task on a worker with no name", empty, `the current assignment of "wc" puts task 3 on a worker with no name`},
		{"missing task first", both, `the current assignment of "wc" leaves out task 5:`},
	} {
		_, err := Place(Input{Workers: Occupy(threeWorkers(), first.Assignment), Topology: wc(), Current: c.cur})
		var ie *InputError
		if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an *InputError saying %q", c.name, err, c.want)
		}
	}
}
