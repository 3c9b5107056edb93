package cluster

import (
	"fmt"
	"slices"

	"github.com/gale-stream/gale/cluster/placement"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
)

// AckerComponent is the component name of acker tasks in a placement.Topology (a
// reserved id: user components cannot start with "__").
const AckerComponent = "__acker"

// TasksOf returns the tasks of topo run with cfg, as placement takes them: every
// component's tasks and then the ackers, numbered as engine.TaskIDs numbers them.
func TasksOf(topo *topology.Topology, cfg topology.Config) []placement.Task {
	byComp, ackers := engine.TaskIDs(topo, cfg)
	var tasks []placement.Task
	for _, c := range topo.Components {
		for _, id := range byComp[c.ID] {
			tasks = append(tasks, placement.Task{ID: id, Component: c.ID})
		}
	}
	for _, id := range ackers {
		tasks = append(tasks, placement.Task{ID: id, Component: AckerComponent})
	}
	return tasks
}

// HostOf returns the engine host number of worker w in assignment a: its index in
// a.Workers (sorted by name) plus one, 0 if a does not use w. The numbering is fixed
// for a generation: every worker of it computes the same.
func HostOf(a *placement.Assignment, w string) int {
	i := slices.Index(a.Workers, w)
	return i + 1
}

// EngineAssignment turns a placement into the engine.Assignment worker w runs: Host
// is HostOf(a, w) and Of maps every task to its worker's host number. An
// assignment that does not use w, or places a task on a worker it does not list,
// is an error.
func EngineAssignment(a *placement.Assignment, w string) (engine.Assignment, error) {
	if a == nil {
		return engine.Assignment{}, fmt.Errorf("cluster: no assignment")
	}
	if !slices.IsSorted(a.Workers) {
		return engine.Assignment{}, fmt.Errorf("cluster: assignment of %s generation %d lists its workers out of order: %v", a.Topology, a.Generation, a.Workers)
	}
	host := HostOf(a, w)
	if host == 0 {
		return engine.Assignment{}, fmt.Errorf("cluster: worker %q has no part in %s generation %d (workers %v)", w, a.Topology, a.Generation, a.Workers)
	}
	of := make(map[int]int, len(a.Of))
	for task, on := range a.Of {
		h := HostOf(a, on)
		if h == 0 {
			return engine.Assignment{}, fmt.Errorf("cluster: %s generation %d places task %d on %q, which it does not list among its workers %v", a.Topology, a.Generation, task, on, a.Workers)
		}
		of[task] = h
	}
	return engine.Assignment{Host: host, Of: of}, nil
}
