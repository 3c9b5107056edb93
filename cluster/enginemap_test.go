package cluster

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gale-stream/gale/cluster/placement"
	"github.com/gale-stream/gale/engine"
)

func TestTasksOfNumbersAsTheEngine(t *testing.T) {
	topo, cfg := shape(t, "ackers")
	got := TasksOf(topo, cfg)
	var want []placement.Task
	for i, c := range []string{"lines", "split", "split", "count", "count", AckerComponent, AckerComponent} {
		want = append(want, placement.Task{ID: i + 1, Component: c})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("TasksOf = %v, want %v", got, want)
	}
	byComp, ackers := engine.TaskIDs(topo, cfg)
	if !slices.Equal(ackers, []int{6, 7}) || !slices.Equal(byComp["split"], []int{2, 3}) {
		t.Fatalf("engine.TaskIDs: %v %v", byComp, ackers)
	}
}

// Every worker of a generation derives the same hosts: its index in Workers + 1,
// and every task's host from its worker's.
func TestEngineAssignment(t *testing.T) {
	topo, cfg := shape(t, "ackers")
	res, err := placement.Place(placement.Input{
		Workers:  []placement.Worker{{Name: "w3", Slots: 1}, {Name: "w1", Slots: 1}, {Name: "w2", Slots: 1}},
		Topology: placement.Topology{Name: "wc", Tasks: TasksOf(topo, cfg)},
		Want:     3,
	})
	if err != nil {
		t.Fatal(err)
	}
	a := res.Assignment
	var of map[int]int
	hosted := map[int]int{}
	for i, w := range []string{"w1", "w2", "w3"} {
		ea, err := EngineAssignment(a, w)
		if err != nil {
			t.Fatal(err)
		}
		if ea.Host != i+1 || HostOf(a, w) != i+1 {
			t.Errorf("%s is host %d, want %d", w, ea.Host, i+1)
		}
		if of == nil {
			of = ea.Of
		} else if !maps.Equal(of, ea.Of) {
			t.Errorf("%s's Of %v differs from w1's %v", w, ea.Of, of)
		}
		for task, h := range ea.Of {
			if h == ea.Host {
				hosted[task] = h
			}
		}
		// The engine's own hosting matches the placement's tasks of w.
		var mine []int
		for task, h := range ea.Of {
			if h == ea.Host {
				mine = append(mine, task)
			}
		}
		slices.Sort(mine)
		if !slices.Equal(mine, a.Tasks(w)) {
			t.Errorf("%s hosts %v, placement gives it %v", w, mine, a.Tasks(w))
		}
	}
	if len(hosted) != 7 || len(of) != 7 {
		t.Errorf("hosted %v, Of %v: want all 7 tasks", hosted, of)
	}

	for _, c := range []struct {
		a    *placement.Assignment
		w    string
		want string
	}{
		{a, "w9", `worker "w9" has no part in wc generation 1`},
		{&placement.Assignment{Topology: "wc", Generation: 2, Workers: []string{"w1"}, Of: map[int]string{1: "w1", 2: "w2"}}, "w1", `places task 2 on "w2", which it does not list`},
		{&placement.Assignment{Topology: "wc", Generation: 2, Workers: []string{"w2", "w1"}}, "w1", "out of order"},
		{nil, "w1", "no assignment"},
	} {
		if _, err := EngineAssignment(c.a, c.w); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("EngineAssignment(%v, %s) = %v, want %q", c.a, c.w, err, c.want)
		}
	}
}
