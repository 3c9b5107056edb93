package placement

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Worker is a live worker as the scheduler sees it.
type Worker struct {
	// Name identifies the worker (gale worker --name); unique among the live ones.
	Name string
	// Slots is how many topologies the worker may run at once (--slots K): a
	// topology takes one slot on every worker it uses, however many of its tasks
	// that worker runs.
	Slots int
	// Runs lists the topologies holding a slot on the worker, as the assignments
	// say (Occupy fills it from them). The topology being placed may be listed:
	// it does not count against its own slot.
	Runs []string
	// Dedicated workers take only the tasks pinned to them, as a Kubernetes node
	// tainted NoSchedule takes only the pods that tolerate the taint: gale serve
	// joins so, keeping its log spout and SQLite sink while the bolts run on the
	// other workers. A dedicated worker does not count towards a topology's Want.
	Dedicated bool
}

// Task is one task of a topology: its id (from 1, as engine.TaskIDs numbers them:
// spouts, bolts and ackers alike) and its component ("__acker" for ackers, say).
type Task struct {
	ID        int
	Component string
}

// Topology is what is to be placed.
type Topology struct {
	Name  string
	Tasks []Task
	// Pins keeps a task on a named worker (task id -> worker name): gale serve's
	// log spout stays in the serve process that owns the log.
	Pins map[int]string
}

// Assignment is a topology's placement: which worker runs each task. Generation
// goes up by one whenever a task changes worker; frames carry it and receivers drop
// older ones (fencing).
type Assignment struct {
	Topology   string
	Generation uint64
	// Want is the number of (non-dedicated) workers asked for (gale submit
	// --workers, gale rebalance --workers).
	Want int
	// Workers lists the chosen workers by name: each holds one slot for the
	// topology and at least one of its tasks.
	Workers []string
	// Of maps every task id to its worker.
	Of map[int]string
}

// Tasks returns the ids of the tasks on worker w, in order.
func (a *Assignment) Tasks(w string) []int {
	var ids []int
	for id, on := range a.Of {
		if on == w {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Clone returns a deep copy.
func (a *Assignment) Clone() *Assignment {
	if a == nil {
		return nil
	}
	c := *a
	c.Workers = slices.Clone(a.Workers)
	c.Of = maps.Clone(a.Of)
	return &c
}

// Input is everything a placement depends on.
type Input struct {
	// Workers are the live workers, in any order.
	Workers []Worker
	// Topology is the topology to place, its tasks in any order.
	Topology Topology
	// Want is the number of workers asked for. 0 keeps Current's: the scheduler's
	// pass after a worker joined or was lost.
	Want int
	// Current is the topology's assignment now, nil for a new topology.
	Current *Assignment
}

// Move is a task that changes worker. From is the worker it was on, maybe lost.
type Move struct {
	Task      int
	Component string
	From, To  string
}

// Result is a placement decision.
type Result struct {
	// Assignment is the new assignment (a new value; Current is never modified).
	Assignment *Assignment
	// Changed says the assignment differs from Current (always, for a new
	// topology): a task moved. Then its Generation is Current's plus one (1 for a
	// new topology); else it is Current's and nothing needs to be written.
	Changed bool
	// Moves lists the tasks whose worker changed, by task id; none for a new
	// topology.
	Moves []Move
	// Short is how many workers fewer than wanted the topology got for lack of free
	// slots; only a pass that keeps the wanted number (Want 0 or Current's) places a
	// topology short, and a later pass fills the gap once a worker with a free slot
	// is live.
	Short int
}

// Place decides where a topology's tasks run. It is a pure function: the same
// Input gives the same Result, whatever the order of its slices, and nothing is read
// but the Input (no clock, no randomness, no I/O). See the package documentation
// for the rules.
func Place(in Input) (Result, error) {
	p, err := newPlan(in)
	if err != nil {
		return Result{}, err
	}
	p.placeOrphans()
	p.evenTotals()
	p.evenComponents()
	if p.fewerMoves() {
		p.evenComponents() // with pins there may be something left (see fewerMoves)
	}
	return p.result(), nil
}

// Occupy returns a copy of workers whose Runs say which of the assignments hold a
// slot on each (sorted), replacing what Runs said: the scheduler derives slot use
// from the assignments it has written, not from what workers report, so that a
// topology placed a moment ago counts at once.
func Occupy(workers []Worker, assignments ...*Assignment) []Worker {
	runs := map[string][]string{}
	for _, a := range assignments {
		if a == nil {
			continue
		}
		for _, w := range a.Workers {
			if !slices.Contains(runs[w], a.Topology) {
				runs[w] = append(runs[w], a.Topology)
			}
		}
	}
	out := slices.Clone(workers)
	for i := range out {
		r := runs[out[i].Name]
		slices.Sort(r)
		out[i].Runs = r
	}
	return out
}

// others returns the topologies other than topo using w's slots, sorted, once each.
func (w *Worker) others(topo string) []string {
	var o []string
	for _, r := range w.Runs {
		if r != topo && !slices.Contains(o, r) {
			o = append(o, r)
		}
	}
	slices.Sort(o)
	return o
}

// hasSlot reports whether topology topo, holding a slot on w, keeps it: w's slots go
// to the topologies its Runs lists in name order, so topo keeps its slot if fewer
// than Slots others come before it by name. It only matters when a worker comes
// back with fewer slots than the topologies it runs (gale worker --slots 0 drains
// it): each topology is placed alone, and its name is all that every Place call
// sees alike, so each decides for itself, and all agree, which ones keep the
// worker's slots and which ones leave it.
func (w *Worker) hasSlot(topo string) bool { return len(w.before(topo)) < w.Slots }

// before returns the topologies other than topo using w's slots that come before
// topo by name, sorted.
func (w *Worker) before(topo string) []string {
	o := w.others(topo) // sorted
	i, _ := slices.BinarySearch(o, topo)
	return o[:i]
}

// plan is one placement being worked out, on counts: x[w*nc+c] tasks of component c
// on (non-dedicated) chosen worker w, of which pin[...] are pinned there and home[...]
// are movable tasks already there. Tasks are bound to the counts at the end.
type plan struct {
	in      Input
	topo    string
	want    int
	short   int
	tasks   []Task   // by id
	comps   []string // in order of their first task id
	comp    []int    // per task (as in tasks): its component
	curOn   []string // per task: its worker in Current ("" without one)
	workers []string // the chosen non-dedicated workers, by name
	nc      int
	x, pin  []int
	home    [][]int // movable tasks already on w, per w*nc+c, by id
	total   []int   // per worker
	mov     []int   // movable tasks per worker
	orphans [][]int // per component: movable tasks with no place yet, by id
	pinned  map[int]string
	dedic   []string // dedicated workers holding pinned tasks
}

// index returns the position of task id in tasks, -1 if there is none.
func (p *plan) index(id int) int {
	i, ok := slices.BinarySearchFunc(p.tasks, id, func(t Task, id int) int { return cmp.Compare(t.ID, id) })
	if !ok {
		return -1
	}
	return i
}

func (p *plan) at(w, c int) int { return w*p.nc + c }

// mv is the movable tasks of c on w.
func (p *plan) mv(w, c int) int { return p.x[p.at(w, c)] - p.pin[p.at(w, c)] }

// move moves one movable task of component c from worker a to worker b.
func (p *plan) move(a, b, c int) {
	p.x[p.at(a, c)]--
	p.x[p.at(b, c)]++
	p.total[a]--
	p.total[b]++
	p.mov[a]--
	p.mov[b]++
}

// cost is what moving one movable task of c from a to b adds to the tasks that
// change worker: 1 if b has all its own tasks of c back already, minus 1 if a holds
// one that came from elsewhere.
func (p *plan) cost(a, b, c int) int {
	d := 0
	if !p.awaits(b, c) {
		d++
	}
	if p.incomer(a, c) {
		d--
	}
	return d
}

// incomer reports whether w holds a movable task of c that came from elsewhere
// (moving one away costs nothing).
func (p *plan) incomer(w, c int) bool { return p.mv(w, c) > len(p.home[p.at(w, c)]) }

// awaits reports whether one of w's own tasks of c has been counted away (giving it
// one back costs nothing).
func (p *plan) awaits(w, c int) bool { return p.mv(w, c) < len(p.home[p.at(w, c)]) }

func newPlan(in Input) (*plan, error) {
	t := in.Topology
	p := &plan{in: in, topo: t.Name, pinned: map[int]string{}}
	// The topology.
	if t.Name == "" {
		return nil, invalid(ErrInvalid, "the topology has no name")
	}
	if len(t.Tasks) == 0 {
		return nil, invalid(ErrEmptyTopology, "topology %q has no tasks", t.Name)
	}
	p.tasks = slices.Clone(t.Tasks)
	slices.SortFunc(p.tasks, func(a, b Task) int { return cmp.Compare(a.ID, b.ID) })
	var dups []int
	for i, task := range p.tasks {
		if task.ID < 1 {
			return nil, invalid(ErrInvalid, "topology %q has a task %d: task ids start at 1", t.Name, task.ID)
		}
		if task.Component == "" {
			return nil, invalid(ErrInvalid, "topology %q: task %d has no component", t.Name, task.ID)
		}
		if i > 0 && p.tasks[i-1].ID == task.ID && !slices.Contains(dups, task.ID) {
			dups = append(dups, task.ID)
		}
	}
	if dups != nil {
		return nil, invalid(ErrDuplicateTask, "topology %q has more than one %s", t.Name, idList(dups))
	}
	compIdx := map[string]int{}
	p.comp = make([]int, len(p.tasks))
	for i, task := range p.tasks {
		idx, ok := compIdx[task.Component]
		if !ok {
			idx = len(p.comps)
			compIdx[task.Component] = idx
			p.comps = append(p.comps, task.Component)
		}
		p.comp[i] = idx
	}
	p.nc = len(p.comps)
	for _, id := range slices.Sorted(maps.Keys(t.Pins)) {
		if p.index(id) < 0 {
			return nil, invalid(ErrInvalid, "topology %q: a pin names task %d, which the topology does not have", t.Name, id)
		}
		if t.Pins[id] == "" {
			return nil, invalid(ErrInvalid, "topology %q: task %d is pinned to a worker with no name", t.Name, id)
		}
	}
	// The workers.
	live := map[string]*Worker{}
	for i := range in.Workers {
		w := &in.Workers[i]
		if w.Name == "" {
			return nil, invalid(ErrInvalid, "a worker has no name")
		}
		if live[w.Name] != nil {
			return nil, invalid(ErrInvalid, "two live workers are named %q", w.Name)
		}
		if w.Slots < 0 {
			return nil, invalid(ErrInvalid, "worker %q has %d slots", w.Name, w.Slots)
		}
		live[w.Name] = w
	}
	// The current assignment and the wanted number of workers.
	cur := in.Current
	strict := cur == nil || (in.Want != 0 && in.Want != cur.Want)
	p.want = in.Want
	if cur != nil {
		if cur.Topology != t.Name {
			return nil, invalid(ErrInvalid, "the current assignment is of topology %q, not %q", cur.Topology, t.Name)
		}
		if cur.Generation < 1 {
			// Kept as it is, it would come back with generation 0 when nothing
			// moves, which no frame could be fenced by.
			return nil, invalid(ErrInvalid, "the current assignment of %q has generation %d: generations start at 1", t.Name, cur.Generation)
		}
		if cur.Want < 1 {
			return nil, invalid(ErrInvalid, "the current assignment of %q asks for %d workers: at least 1 is needed", t.Name, cur.Want)
		}
		var missing, extra, unnamed []int
		p.curOn = make([]string, len(p.tasks))
		for i, task := range p.tasks {
			on, ok := cur.Of[task.ID]
			switch {
			case !ok:
				missing = append(missing, task.ID)
			case on == "":
				unnamed = append(unnamed, task.ID)
			}
			p.curOn[i] = on
		}
		if len(cur.Of) != len(p.tasks)-len(missing) {
			for id := range cur.Of {
				if p.index(id) < 0 {
					extra = append(extra, id)
				}
			}
		}
		if missing != nil || extra != nil {
			slices.Sort(extra)
			var what []string
			if missing != nil {
				what = append(what, "leaves out "+idList(missing))
			}
			if extra != nil {
				what = append(what, "places "+idList(extra)+", which the topology does not have")
			}
			return nil, invalid(ErrInvalid, "the current assignment of %q %s: a topology's tasks are fixed for its life", t.Name, strings.Join(what, " and "))
		}
		if unnamed != nil {
			return nil, invalid(ErrInvalid, "the current assignment of %q puts %s on a worker with no name", t.Name, idList(unnamed))
		}
		if p.want == 0 {
			p.want = cur.Want
		}
	}
	switch {
	case in.Want < 0:
		return nil, invalid(ErrInvalid, "topology %q asks for %d workers: at least 1 is needed", t.Name, in.Want)
	case p.want < 1: // Want 0 and no Current (a Current's Want is at least 1)
		return nil, invalid(ErrInvalid, "topology %q asks for 0 workers, which keeps the current assignment's number, and it has none", t.Name)
	}
	if len(live) == 0 {
		return nil, fmt.Errorf("placement: topology %q: %w", t.Name, ErrNoWorkers)
	}
	// A worker holds the topology if the current assignment uses it or its Runs
	// say so. It may take the topology if it holds it and still has a slot for it
	// (see hasSlot: one that came back with fewer slots keeps the first
	// topologies by name), or if it does not and has a free slot.
	curCount := map[string]int{}
	for i := range p.curOn {
		curCount[p.curOn[i]]++
	}
	holds := func(w *Worker) bool { return curCount[w.Name] > 0 || slices.Contains(w.Runs, t.Name) }
	free := func(w *Worker) int { return w.Slots - len(w.others(t.Name)) }
	eligible := func(w *Worker) bool {
		if holds(w) {
			return w.hasSlot(t.Name)
		}
		return free(w) > 0
	}
	// Pins: the worker must be live and have a slot.
	pinnedRegular := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(t.Pins)) {
		name := t.Pins[id]
		w := live[name]
		if w == nil {
			return nil, &PinError{Topology: t.Name, Task: id, Worker: name, Err: ErrWorkerNotLive}
		}
		if !eligible(w) {
			return nil, &PinError{Topology: t.Name, Task: id, Worker: name, Err: ErrNoFreeSlots, Slots: w.Slots, Runs: w.others(t.Name)}
		}
		p.pinned[id] = name
		if w.Dedicated {
			if !slices.Contains(p.dedic, name) {
				p.dedic = append(p.dedic, name)
			}
		} else {
			pinnedRegular[name] = true
		}
	}
	slices.Sort(p.dedic)
	if len(pinnedRegular) > p.want {
		return nil, invalid(ErrPinsExceedWant, "topology %q: its pins name %d workers (%s) but it asks for %d",
			t.Name, len(pinnedRegular), strings.Join(slices.Sorted(maps.Keys(pinnedRegular)), ", "), p.want)
	}
	// How many non-dedicated workers: as many as wanted, but no more than can each
	// hold a task (every one without pins needs a movable task).
	movable := len(p.tasks) - len(p.pinned)
	n := min(p.want, len(pinnedRegular)+movable)
	var cands []*Worker
	var full []FullWorker
	for _, name := range slices.Sorted(maps.Keys(live)) {
		w := live[name]
		switch {
		case w.Dedicated:
		case eligible(w):
			cands = append(cands, w)
		default:
			full = append(full, FullWorker{Name: w.Name, Slots: w.Slots, Runs: w.others(t.Name)})
		}
	}
	if len(cands) < n {
		if strict || len(cands) == 0 {
			e := &SlotsError{Topology: t.Name, Asked: n, Full: full}
			for _, w := range cands {
				e.Free = append(e.Free, w.Name)
			}
			return nil, e
		}
		p.short = n - len(cands)
		n = len(cands)
	}
	// The chosen set: pinned workers; then those already running the topology,
	// most tasks first (the fewest moves); then those whose Runs list it; then the
	// most free slots; names break ties.
	rank := func(w *Worker) (int, int) {
		switch {
		case pinnedRegular[w.Name]:
			return 0, 0
		case curCount[w.Name] > 0:
			return 1, -curCount[w.Name]
		case holds(w):
			return 2, 0
		}
		return 3, -free(w)
	}
	slices.SortStableFunc(cands, func(a, b *Worker) int {
		ga, ka := rank(a)
		gb, kb := rank(b)
		return cmp.Or(cmp.Compare(ga, gb), cmp.Compare(ka, kb), cmp.Compare(a.Name, b.Name))
	})
	for _, w := range cands[:n] {
		p.workers = append(p.workers, w.Name)
	}
	slices.Sort(p.workers)
	// Counts.
	nw := len(p.workers)
	widx := make(map[string]int, nw)
	for i, w := range p.workers {
		widx[w] = i
	}
	p.x = make([]int, nw*p.nc)
	p.pin = make([]int, nw*p.nc)
	p.home = make([][]int, nw*p.nc)
	p.total = make([]int, nw)
	p.mov = make([]int, nw)
	p.orphans = make([][]int, p.nc)
	for i, task := range p.tasks {
		c := p.comp[i]
		if name, ok := p.pinned[task.ID]; ok {
			if w, ok := widx[name]; ok {
				p.x[p.at(w, c)]++
				p.pin[p.at(w, c)]++
				p.total[w]++
			}
			continue
		}
		if cur != nil {
			if w, ok := widx[p.curOn[i]]; ok {
				p.x[p.at(w, c)]++
				p.home[p.at(w, c)] = append(p.home[p.at(w, c)], task.ID)
				p.total[w]++
				p.mov[w]++
				continue
			}
		}
		p.orphans[c] = append(p.orphans[c], task.ID)
	}
	return p, nil
}

// placeOrphans counts each task without a place (new, or on a worker lost or no
// longer chosen) on the worker with the fewest of its component, then the fewest
// tasks, then the first by name: a deal by component when nothing is placed yet.
// evenTotals evens what that leaves uneven, moving these tasks first, which costs
// nothing.
func (p *plan) placeOrphans() {
	for c, ids := range p.orphans {
		for range ids {
			best := 0
			for w := 1; w < len(p.workers); w++ {
				if xw, xb := p.x[p.at(w, c)], p.x[p.at(best, c)]; xw < xb || xw == xb && p.total[w] < p.total[best] {
					best = w
				}
			}
			p.x[p.at(best, c)]++
			p.total[best]++
			p.mov[best]++
		}
	}
}

// evenTotals moves movable tasks from the fullest workers that have one to the
// emptiest until no worker holding a movable task has more than one task over the
// emptiest. Each step picks, for each component, the fullest worker with the most
// of it and the emptiest with the fewest, and moves the component of which the
// source has the most more than the destination (so per-component spread never gets
// worse when it can be helped), the cheapest in tasks that change worker on a tie.
func (p *plan) evenTotals() {
	nw := len(p.workers)
	if nw == 0 {
		return
	}
	for {
		hi, lo := -1, p.total[0]
		for w := range nw {
			lo = min(lo, p.total[w])
			if p.mov[w] > 0 {
				hi = max(hi, p.total[w])
			}
		}
		if hi < 0 || hi-lo <= 1 {
			return
		}
		ba, bb, bc := -1, -1, -1
		var bk [3]int
		for c := range p.nc {
			a, b := -1, -1
			for w := range nw {
				if p.total[w] == hi && p.mv(w, c) > 0 {
					if a < 0 || p.x[p.at(w, c)] > p.x[p.at(a, c)] || p.x[p.at(w, c)] == p.x[p.at(a, c)] && p.incomer(w, c) && !p.incomer(a, c) {
						a = w
					}
				}
				if p.total[w] == lo {
					if b < 0 || p.x[p.at(w, c)] < p.x[p.at(b, c)] || p.x[p.at(w, c)] == p.x[p.at(b, c)] && p.awaits(w, c) && !p.awaits(b, c) {
						b = w
					}
				}
			}
			if a < 0 {
				continue
			}
			diff := p.x[p.at(a, c)] - p.x[p.at(b, c)]
			if k := [3]int{-diff, p.cost(a, b, c), c}; ba < 0 || slices.Compare(k[:], bk[:]) < 0 {
				ba, bb, bc, bk = a, b, c, k
			}
		}
		p.move(ba, bb, bc)
	}
}

// evenComponents evens each component's tasks over the workers without undoing
// evenTotals: while some worker a holds a movable task of c and has two or more of c
// over some worker b, it moves one to b if b has fewer tasks in all than a (the
// totals stay even), or else swaps it for a movable task of a component d of which b
// has more than a (the totals do not change). Each step lowers the sum of squares of
// the per-component counts, so it ends; without pins on these workers it ends with
// every component within one.
func (p *plan) evenComponents() {
	nw := len(p.workers)
	if nw < 2 {
		return
	}
	for {
		moved := false
		for c := range p.nc {
			// The likeliest pair first: the most of c (fullest in all on a tie), the
			// fewest of c (emptiest in all on a tie).
			a, b := -1, 0
			for w := range nw {
				xw, xb := p.x[p.at(w, c)], p.x[p.at(b, c)]
				if xw < xb || xw == xb && p.total[w] < p.total[b] {
					b = w
				}
				if p.mv(w, c) > 0 {
					if a < 0 {
						a = w
					} else if xa := p.x[p.at(a, c)]; xw > xa || xw == xa && p.total[w] > p.total[a] {
						a = w
					}
				}
			}
			if a < 0 || p.x[p.at(a, c)]-p.x[p.at(b, c)] < 2 {
				continue
			}
			if p.improve(a, b, c) {
				moved = true
				continue
			}
			// Pins can block that pair: try every other.
		pairs:
			for a := range nw {
				if p.mv(a, c) == 0 {
					continue
				}
				for b := range nw {
					if p.x[p.at(a, c)]-p.x[p.at(b, c)] >= 2 && p.improve(a, b, c) {
						moved = true
						break pairs
					}
				}
			}
		}
		if !moved {
			return
		}
	}
}

// improve moves a movable task of c from a to b, which has two fewer of c, by a
// move or a swap that keeps the totals even, and reports whether it could.
func (p *plan) improve(a, b, c int) bool {
	if p.total[b] < p.total[a] {
		p.move(a, b, c)
		return true
	}
	d := p.swapFor(a, b, c)
	if d < 0 {
		return false
	}
	p.move(a, b, c)
	p.move(b, a, d)
	return true
}

// swapFor picks the component d != c to move from b back to a in exchange for one
// of c: b holds a movable task of d and more of d than a; the cheapest, then the one
// of which b has the most more. -1 if there is none.
func (p *plan) swapFor(a, b, c int) int {
	best, bc, bd := -1, 0, 0
	for d := range p.nc {
		if d == c || p.mv(b, d) == 0 {
			continue
		}
		diff := p.x[p.at(b, d)] - p.x[p.at(a, d)]
		if diff <= 0 {
			continue
		}
		k := p.cost(b, a, d)
		if best < 0 || k < bc || k == bc && diff > bd {
			best, bc, bd = d, k, diff
		}
	}
	return best
}

// fewerMoves undoes what the evening moved needlessly. The counts stay as even as
// they are while workers pass tasks round a cycle, each giving one task of a
// component of which it has one more than the next (the two swap their counts of
// it; totals do not change), or along a path from a worker with one task over the
// emptiest to an emptiest one (the two swap totals). Such a cycle or path lowers
// the tasks that change worker when its costs (see cost) add up below zero;
// fewerMoves finds one with Bellman-Ford over the workers and a node X that closes
// the paths, applies it, and starts again until there is none. Without pins this is
// the optimality condition of the placement as a min-cost flow (components to
// workers, the extra task of a component over its even share on the edges), so the
// counts then move the fewest tasks any even placement on these workers could. It
// reports whether it changed anything.
func (p *plan) fewerMoves() bool {
	nw := len(p.workers)
	if nw < 2 {
		return false
	}
	const none = math.MaxInt
	nv := nw + 1 // the workers, then X
	x := nw
	weight := make([]int, nv*nv)
	via := make([]int, nv*nv) // the component an edge between workers moves
	dist := make([]int, nv)
	parent := make([]int, nv)
	changed := false
	for {
		lo := slices.Min(p.total)
		for i := range weight {
			weight[i] = none
		}
		for a := range nw {
			for b := range nw {
				if a == b || p.total[b] > lo+1 { // b takes a movable task: it must not be over
					continue
				}
				for c := range p.nc {
					if p.mv(a, c) == 0 || p.x[p.at(a, c)] != p.x[p.at(b, c)]+1 {
						continue
					}
					if k := p.cost(a, b, c); k < weight[a*nv+b] {
						weight[a*nv+b], via[a*nv+b] = k, c
					}
				}
			}
			if p.total[a] == lo {
				weight[a*nv+x] = 0 // a path may end at an emptiest worker
			}
			if p.total[a] == lo+1 {
				weight[x*nv+a] = 0 // and start at one with a task more
			}
		}
		// Bellman-Ford from a virtual source at distance 0 to every node.
		clear(dist)
		for i := range parent {
			parent[i] = -1
		}
		last := -1
		for range nv {
			last = -1
			for u := range nv {
				for v := range nv {
					if wt := weight[u*nv+v]; wt != none && dist[u]+wt < dist[v] {
						dist[v], parent[v], last = dist[u]+wt, u, v
					}
				}
			}
			if last < 0 {
				return changed
			}
		}
		// A relaxation in the last pass: a negative cycle leads to last.
		v := last
		for range nv {
			v = parent[v]
		}
		cycle := []int{v}
		for u := parent[v]; u != v; u = parent[u] {
			cycle = append(cycle, u)
		}
		slices.Reverse(cycle) // in the direction tasks go
		for i, u := range cycle {
			w := cycle[(i+1)%len(cycle)]
			if u != x && w != x {
				p.move(u, w, via[u*nv+w])
			}
		}
		changed = true
	}
}

// result binds tasks to the counts with the fewest changes: each worker keeps the
// lowest-numbered of its own movable tasks of each component up to its count, and
// the rest (with the orphans) fill the workers short of their count, lowest task id
// to the first worker by name.
func (p *plan) result() Result {
	of := make(map[int]string, len(p.tasks))
	maps.Copy(of, p.pinned)
	pool := make([][]int, p.nc)
	for c := range p.nc {
		pool[c] = slices.Clone(p.orphans[c])
	}
	for w, name := range p.workers {
		for c := range p.nc {
			h := p.home[p.at(w, c)]
			keep := min(len(h), p.mv(w, c))
			for _, id := range h[:keep] {
				of[id] = name
			}
			pool[c] = append(pool[c], h[keep:]...)
		}
	}
	for c := range p.nc {
		slices.Sort(pool[c])
		for w, name := range p.workers {
			for need := p.mv(w, c) - min(len(p.home[p.at(w, c)]), p.mv(w, c)); need > 0; need-- {
				of[pool[c][0]] = name
				pool[c] = pool[c][1:]
			}
		}
	}
	a := &Assignment{Topology: p.topo, Generation: 1, Want: p.want, Of: of}
	a.Workers = append(slices.Clone(p.workers), p.dedic...)
	slices.Sort(a.Workers)
	r := Result{Assignment: a, Changed: true, Short: p.short}
	if cur := p.in.Current; cur != nil {
		for i, task := range p.tasks {
			if from, to := p.curOn[i], of[task.ID]; from != to {
				r.Moves = append(r.Moves, Move{Task: task.ID, Component: task.Component, From: from, To: to})
			}
		}
		r.Changed = len(r.Moves) > 0 || !slices.Equal(a.Workers, sortedSet(cur.Workers))
		a.Generation = cur.Generation
		if r.Changed {
			a.Generation++
		}
	}
	return r
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// idList names task ids in a message: "task 3", "tasks 3, 5, 9" (the first ten,
// then how many more).
func idList(ids []int) string {
	if len(ids) == 1 {
		return "task " + strconv.Itoa(ids[0])
	}
	var b strings.Builder
	b.WriteString("tasks ")
	for i, id := range ids {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(ids)-10)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}
