package placement

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Check reports every invariant the assignment a of topology topo breaks on the
// live workers (their Runs as Occupy gives them from every assignment, a's
// included), each as an error matching ErrInvariant, joined; nil if it keeps them
// all:
//   - every task of the topology is placed, and nothing else is;
//   - Workers is sorted, without repeats, and is exactly the workers Of uses;
//   - every worker used is live and has a slot for the topology: its slots go to
//     the topologies its Runs lists in name order, so fewer than its slots come
//     before this one by name (a worker that came back with fewer slots than the
//     topologies it runs keeps the first ones; Check of the others fails until
//     they are placed again);
//   - every pin is honoured, and a dedicated worker holds pinned tasks only;
//   - the non-dedicated workers are evenly loaded: no worker holding a task that is
//     not pinned has more than one task over the emptiest; without pins on them,
//     each component's tasks also differ by at most one between any two; with pins,
//     as even as the pins allow: no task that is not pinned could move to a worker
//     with two fewer of its component, alone (onto a worker with fewer tasks in all)
//     or swapped for a task of a component the other worker has more of, keeping
//     the totals even.
func Check(a *Assignment, topo Topology, workers []Worker) error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvariant}, args...)...))
	}
	if a == nil {
		return fmt.Errorf("%w: no assignment", ErrInvariant)
	}
	if a.Topology != topo.Name {
		bad("the assignment is of topology %q, not %q", a.Topology, topo.Name)
	}
	if a.Generation < 1 {
		bad("generation %d: generations start at 1", a.Generation)
	}
	// Every task exactly once.
	comp := map[int]string{}
	for _, t := range topo.Tasks {
		comp[t.ID] = t.Component
		if a.Of[t.ID] == "" {
			bad("task %d is not placed", t.ID)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(a.Of)) {
		if _, ok := comp[id]; !ok {
			bad("task %d is placed but the topology has no such task", id)
		}
	}
	// Workers is the set Of uses.
	used := map[string]bool{}
	for _, w := range a.Of {
		used[w] = true
	}
	if !slices.IsSorted(a.Workers) || len(slices.Compact(slices.Clone(a.Workers))) != len(a.Workers) {
		bad("workers %v are not sorted and distinct", a.Workers)
	}
	for _, w := range a.Workers {
		if !used[w] {
			bad("worker %q is chosen but holds no task", w)
		}
	}
	for _, w := range slices.Sorted(maps.Keys(used)) {
		if !slices.Contains(a.Workers, w) {
			bad("worker %q holds tasks but is not among the chosen workers %v", w, a.Workers)
		}
	}
	// Live, with a slot.
	live := map[string]*Worker{}
	for i := range workers {
		live[workers[i].Name] = &workers[i]
	}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		w := live[name]
		if w == nil {
			bad("worker %q holds tasks %v but is not live", name, a.Tasks(name))
			continue
		}
		if !w.hasSlot(topo.Name) {
			if w.Slots == 0 {
				bad("worker %q has no slots", name)
			} else {
				b := w.before(topo.Name)
				bad("worker %q has %d %s, taken by %s, which %s before %q by name", name, w.Slots, plural(w.Slots, "slot", "slots"),
					strings.Join(b, ", "), plural(len(b), "comes", "come"), topo.Name)
			}
		}
	}
	// Pins, dedicated workers.
	for _, id := range slices.Sorted(maps.Keys(topo.Pins)) {
		if on := a.Of[id]; on != topo.Pins[id] {
			bad("task %d is pinned to %q but placed on %q", id, topo.Pins[id], on)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(a.Of)) {
		if w := live[a.Of[id]]; w != nil && w.Dedicated && topo.Pins[id] != w.Name {
			bad("task %d is on dedicated worker %q but not pinned there", id, w.Name)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Spread, over the non-dedicated workers used.
	var regular []string
	for _, name := range a.Workers {
		if !live[name].Dedicated {
			regular = append(regular, name)
		}
	}
	if len(regular) < 2 {
		return nil
	}
	var comps []string
	for _, t := range topo.Tasks {
		if !slices.Contains(comps, t.Component) {
			comps = append(comps, t.Component)
		}
	}
	slices.Sort(comps)
	idx := map[string]int{}
	for i, c := range comps {
		idx[c] = i
	}
	nc := len(comps)
	x := make([]int, len(regular)*nc)   // tasks of c on w
	mov := make([]int, len(regular)*nc) // of them not pinned
	total := make([]int, len(regular))
	pinned := false
	for w, name := range regular {
		for _, id := range a.Tasks(name) {
			c := idx[comp[id]]
			x[w*nc+c]++
			total[w]++
			if _, ok := topo.Pins[id]; ok {
				pinned = true
			} else {
				mov[w*nc+c]++
			}
		}
	}
	movable := func(w int) bool {
		for c := range nc {
			if mov[w*nc+c] > 0 {
				return true
			}
		}
		return false
	}
	least := slices.Min(total)
	for w, name := range regular {
		if total[w] > least+1 && movable(w) {
			bad("worker %q holds %d tasks, some not pinned, and another holds %d", name, total[w], least)
		}
	}
	for c, cn := range comps {
		lo, hi := -1, -1
		for w := range regular {
			if lo < 0 || x[w*nc+c] < x[lo*nc+c] {
				lo = w
			}
			if hi < 0 || x[w*nc+c] > x[hi*nc+c] {
				hi = w
			}
		}
		if !pinned && x[hi*nc+c]-x[lo*nc+c] > 1 {
			bad("component %q: worker %q holds %d of its tasks, %q %d", cn, regular[hi], x[hi*nc+c], regular[lo], x[lo*nc+c])
			continue
		}
		for a := range regular {
			if mov[a*nc+c] == 0 {
				continue
			}
			for b := range regular {
				if x[a*nc+c]-x[b*nc+c] < 2 {
					continue
				}
				if total[b] < total[a] {
					bad("component %q: a task of it could move from %q (%d of it, %d in all) to %q (%d, %d)",
						cn, regular[a], x[a*nc+c], total[a], regular[b], x[b*nc+c], total[b])
				}
				for d, dn := range comps {
					if d != c && mov[b*nc+d] > 0 && x[b*nc+d] > x[a*nc+d] {
						bad("component %q: a task of it on %q could swap with one of %q on %q", cn, regular[a], dn, regular[b])
						break
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}
