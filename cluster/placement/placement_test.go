package placement

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// cluster is the state a script builds: the live workers, the topologies and their
// assignments, as the KV-backed scheduler would keep them.
type cluster struct {
	workers  []Worker // live, in join order; Runs filled by Occupy when placing
	topos    map[string]Topology
	assigned map[string]*Assignment
	// lost are the topologies that lost a slot on a worker that came back with
	// fewer slots than it ran: their assignments break Check until placed again.
	lost map[string]bool
}

func (cl *cluster) all() []*Assignment {
	var out []*Assignment
	for _, name := range slices.Sorted(maps.Keys(cl.assigned)) {
		out = append(out, cl.assigned[name])
	}
	return out
}

// live returns the live workers, their Runs from the assignments.
func (cl *cluster) live() []Worker { return Occupy(cl.workers, cl.all()...) }

func (cl *cluster) worker(name string) int {
	return slices.IndexFunc(cl.workers, func(w Worker) bool { return w.Name == name })
}

// TestPlacementDataDriven replays the scripts in testdata/, whole interactions of
// the scheduler with a cluster:
//
//	join name=W [slots=K] [dedicated]     a worker joins (slots default 1)
//	leave name=W                          a worker is lost (its heartbeat expired)
//	restart name=W slots=K                a live worker comes back with K slots
//	topology name=T components=(C:N, ...) [pins=(ID:W, ...)]
//	topology name=T tasks=(ID:C, ...) [pins=(...)]
//	place topo=T [workers=N]              Place with T's assignment as Current; a
//	                                      success becomes T's assignment
//	drop topo=T                           T is killed: its slots are free again
//	show [topo=T]   workers
//
// Tasks of components=... are numbered from 1 in order, as engine.TaskIDs does.
// A worker that joins or restarts with fewer slots than the topologies it runs
// keeps the first ones by name; the script shows which lose their slot ("no
// slot"), and those are not checked until placed again. After every command every
// other assignment whose workers are all live must pass Check;
// after every successful place, Place must give the same Result on its input
// shuffled (worker, task and Runs order), and placing the result again must change
// nothing.
func TestPlacementDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		cl := &cluster{topos: map[string]Topology{}, assigned: map[string]*Assignment{}, lost: map[string]bool{}}
		shuffle := rand.New(rand.NewPCG(1, 2))
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := runCommand(t, d, cl, shuffle)
			for _, a := range cl.all() {
				if !allLive(a, cl.workers) || cl.lost[a.Topology] {
					continue
				}
				if err := Check(a, cl.topos[a.Topology], cl.live()); err != nil {
					t.Fatalf("%s: after %q: %v", d.Pos, d.Cmd, err)
				}
			}
			return out
		})
	})
}

// lostSlots marks the topologies on worker name beyond its slots (the first by name
// keep theirs) as having lost their slot, and says which.
func (cl *cluster) lostSlots(name string) string {
	w := cl.live()[cl.worker(name)]
	var b strings.Builder
	for i, topo := range w.Runs { // sorted by Occupy
		if i >= w.Slots {
			cl.lost[topo] = true
			fmt.Fprintf(&b, "\nno slot: %s's tasks %s on %s", topo, fmtIDs(cl.assigned[topo].Tasks(name)), name)
		}
	}
	return b.String()
}

func allLive(a *Assignment, workers []Worker) bool {
	for _, w := range a.Workers {
		if !slices.ContainsFunc(workers, func(l Worker) bool { return l.Name == w }) {
			return false
		}
	}
	return true
}

func runCommand(t *testing.T, d *datadriven.TestData, cl *cluster, shuffle *rand.Rand) string {
	str := func(key, def string) string {
		if a, ok := d.Arg(key); ok {
			return a.Vals[0]
		}
		return def
	}
	num := func(key string, def int) int {
		v, err := strconv.Atoi(str(key, strconv.Itoa(def)))
		if err != nil {
			d.Fatalf(t, "%s: bad %s: %v", d.Cmd, key, err)
		}
		return v
	}
	pairs := func(key string) [][2]string {
		a, ok := d.Arg(key)
		if !ok {
			return nil
		}
		var out [][2]string
		for _, v := range a.Vals {
			k, val, ok := strings.Cut(v, ":")
			if !ok {
				d.Fatalf(t, "%s: %s wants key:value pairs, got %q", d.Cmd, key, v)
			}
			out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(val)})
		}
		return out
	}
	atoi := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			d.Fatalf(t, "%s: bad number %q", d.Cmd, s)
		}
		return v
	}
	switch d.Cmd {
	case "join":
		name := str("name", "")
		if cl.worker(name) >= 0 {
			d.Fatalf(t, "worker %q is live already", name)
		}
		cl.workers = append(cl.workers, Worker{Name: name, Slots: num("slots", 1), Dedicated: d.HasArg("dedicated")})
		return fmtWorkers(cl.live()) + cl.lostSlots(name)
	case "restart":
		name := str("name", "")
		i := cl.worker(name)
		if i < 0 {
			d.Fatalf(t, "worker %q is not live", name)
		}
		cl.workers[i].Slots = num("slots", 1)
		return fmtWorkers(cl.live()) + cl.lostSlots(name)
	case "leave":
		name := str("name", "")
		i := cl.worker(name)
		if i < 0 {
			d.Fatalf(t, "worker %q is not live", name)
		}
		cl.workers = slices.Delete(cl.workers, i, i+1)
		var b strings.Builder
		b.WriteString(fmtWorkers(cl.live()))
		for _, a := range cl.all() {
			if ids := a.Tasks(name); ids != nil {
				fmt.Fprintf(&b, "\nlost: %s's tasks %s", a.Topology, fmtIDs(ids))
			}
		}
		return b.String()
	case "topology":
		topo := Topology{Name: str("name", "")}
		next := 1
		for _, p := range pairs("components") {
			for range atoi(p[1]) {
				topo.Tasks = append(topo.Tasks, Task{ID: next, Component: p[0]})
				next++
			}
		}
		for _, p := range pairs("tasks") {
			topo.Tasks = append(topo.Tasks, Task{ID: atoi(p[0]), Component: p[1]})
		}
		for _, p := range pairs("pins") {
			if topo.Pins == nil {
				topo.Pins = map[int]string{}
			}
			topo.Pins[atoi(p[0])] = p[1]
		}
		cl.topos[topo.Name] = topo
		return fmtTopology(topo)
	case "place":
		name := str("topo", "")
		topo, ok := cl.topos[name]
		if !ok {
			d.Fatalf(t, "no topology %q", name)
		}
		in := Input{Workers: cl.live(), Topology: topo, Want: num("workers", 0), Current: cl.assigned[name]}
		res, err := Place(in)
		if err != nil {
			return fmtError(err)
		}
		checkStable(t, d, in, res, shuffle, cl)
		cl.assigned[name] = res.Assignment
		delete(cl.lost, name)
		return fmtResult(res, in.Current, topo)
	case "drop":
		delete(cl.assigned, str("topo", ""))
		delete(cl.lost, str("topo", ""))
		return fmtWorkers(cl.live())
	case "show":
		var b strings.Builder
		for _, a := range cl.all() {
			if name, ok := d.Arg("topo"); ok && name.Vals[0] != a.Topology {
				continue
			}
			b.WriteString(fmtAssignment(a, cl.topos[a.Topology]))
		}
		return strings.TrimSpace(b.String())
	case "workers":
		return fmtWorkers(cl.live())
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// checkStable asserts that Place is deterministic (the same Result on the input
// shuffled) and at rest (placing its result again, the slots updated, changes
// nothing).
func checkStable(t *testing.T, d *datadriven.TestData, in Input, res Result, r *rand.Rand, cl *cluster) {
	t.Helper()
	again, err := Place(shuffled(in, r))
	if err != nil {
		t.Fatalf("%s: shuffled input: %v", d.Pos, err)
	}
	if !reflect.DeepEqual(again, res) {
		t.Fatalf("%s: shuffled input gave another result:\n%+v\nnot\n%+v", d.Pos, again, res)
	}
	others := []*Assignment{res.Assignment}
	for _, a := range cl.all() {
		if a.Topology != in.Topology.Name {
			others = append(others, a)
		}
	}
	rest, err := Place(Input{Workers: Occupy(in.Workers, others...), Topology: in.Topology, Current: res.Assignment})
	if err != nil {
		t.Fatalf("%s: placing the result again: %v", d.Pos, err)
	}
	if rest.Changed || rest.Moves != nil || rest.Assignment.Generation != res.Assignment.Generation || !reflect.DeepEqual(rest.Assignment, res.Assignment) {
		t.Fatalf("%s: placing the result again changed it: %+v", d.Pos, rest)
	}
}

// shuffled returns a copy of in with its workers, their Runs and the tasks in
// another order.
func shuffled(in Input, r *rand.Rand) Input {
	out := in
	out.Workers = slices.Clone(in.Workers)
	r.Shuffle(len(out.Workers), func(i, j int) { out.Workers[i], out.Workers[j] = out.Workers[j], out.Workers[i] })
	for i := range out.Workers {
		runs := slices.Clone(out.Workers[i].Runs)
		r.Shuffle(len(runs), func(i, j int) { runs[i], runs[j] = runs[j], runs[i] })
		out.Workers[i].Runs = runs
	}
	out.Topology.Tasks = slices.Clone(in.Topology.Tasks)
	r.Shuffle(len(out.Topology.Tasks), func(i, j int) {
		out.Topology.Tasks[i], out.Topology.Tasks[j] = out.Topology.Tasks[j], out.Topology.Tasks[i]
	})
	return out
}

func fmtWorkers(ws []Worker) string {
	var b strings.Builder
	b.WriteString("workers:")
	if len(ws) == 0 {
		b.WriteString(" none")
	}
	for _, w := range slices.SortedFunc(slices.Values(ws), func(a, b Worker) int { return strings.Compare(a.Name, b.Name) }) {
		fmt.Fprintf(&b, " %s %d/%d", w.Name, len(w.Runs), w.Slots)
		if w.Dedicated {
			b.WriteString(" dedicated")
		}
		if len(w.Runs) > 0 {
			fmt.Fprintf(&b, " [%s]", strings.Join(w.Runs, ","))
		}
		b.WriteString(";")
	}
	return strings.TrimSuffix(b.String(), ";")
}

func fmtTopology(t Topology) string {
	var b strings.Builder
	b.WriteString(t.Name + ":")
	for _, g := range groupByComponent(t, nil) {
		fmt.Fprintf(&b, " %s %s |", g.comp, fmtIDs(g.ids))
	}
	s := strings.TrimSuffix(b.String(), " |")
	if len(t.Pins) > 0 {
		var pins []string
		for _, id := range slices.Sorted(maps.Keys(t.Pins)) {
			pins = append(pins, fmt.Sprintf("%d->%s", id, t.Pins[id]))
		}
		s += " (pins " + strings.Join(pins, " ") + ")"
	}
	return s
}

type group struct {
	comp string
	ids  []int
}

// groupByComponent returns the tasks of t (those in keep, if not nil) by component,
// in order of each component's first task.
func groupByComponent(t Topology, keep []int) []group {
	tasks := slices.SortedFunc(slices.Values(t.Tasks), func(a, b Task) int { return a.ID - b.ID })
	var gs []group
	for _, task := range tasks {
		if keep != nil && !slices.Contains(keep, task.ID) {
			continue
		}
		i := slices.IndexFunc(gs, func(g group) bool { return g.comp == task.Component })
		if i < 0 {
			gs = append(gs, group{comp: task.Component})
			i = len(gs) - 1
		}
		gs[i].ids = append(gs[i].ids, task.ID)
	}
	return gs
}

// fmtIDs prints ids compactly: 1-3,7.
func fmtIDs(ids []int) string {
	var parts []string
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ids[i], ids[j]))
		} else {
			parts = append(parts, strconv.Itoa(ids[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

func fmtAssignment(a *Assignment, t Topology) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s gen=%d want=%d workers=%s\n", a.Topology, a.Generation, a.Want, strings.Join(a.Workers, ","))
	for _, w := range a.Workers {
		ids := a.Tasks(w)
		fmt.Fprintf(&b, "  %s %d:", w, len(ids))
		for i, g := range groupByComponent(t, ids) {
			if i > 0 {
				b.WriteString(" |")
			}
			fmt.Fprintf(&b, " %s %s", g.comp, fmtIDs(g.ids))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func fmtResult(res Result, cur *Assignment, t Topology) string {
	var b strings.Builder
	b.WriteString(fmtAssignment(res.Assignment, t))
	switch {
	case cur == nil:
		b.WriteString("new")
	case !res.Changed:
		b.WriteString("unchanged")
	default:
		fmt.Fprintf(&b, "moved %d:", len(res.Moves))
		for _, m := range res.Moves {
			fmt.Fprintf(&b, " %d %s->%s", m.Task, m.From, m.To)
		}
	}
	if res.Short > 0 {
		fmt.Fprintf(&b, "\nshort %d", res.Short)
	}
	return b.String()
}

var sentinels = []struct {
	name string
	err  error
}{
	{"ErrInvalid", ErrInvalid}, {"ErrEmptyTopology", ErrEmptyTopology}, {"ErrDuplicateTask", ErrDuplicateTask},
	{"ErrPinsExceedWant", ErrPinsExceedWant}, {"ErrNoWorkers", ErrNoWorkers}, {"ErrNoFreeSlots", ErrNoFreeSlots},
	{"ErrWorkerNotLive", ErrWorkerNotLive},
}

func fmtError(err error) string {
	var is []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			is = append(is, s.name)
		}
	}
	return fmt.Sprintf("error: %v\nmatches: %s", err, strings.Join(is, ", "))
}
