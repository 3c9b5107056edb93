package placement

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error Place returns matches one of them with errors.Is; the
// typed errors below carry the details (errors.As).
var (
	// ErrInvalid: the input is malformed (a task id below 1, a task without a
	// component, two workers of one name, a negative slot count, a Current for
	// another topology or for other tasks, of generation 0, asking for fewer than
	// 1 worker, or putting a task on a worker with no name...). Every *InputError
	// matches it.
	ErrInvalid = errors.New("invalid placement input")
	// ErrEmptyTopology: the topology has no tasks (an *InputError; matches ErrInvalid too).
	ErrEmptyTopology = errors.New("topology has no tasks")
	// ErrDuplicateTask: two tasks share an id (an *InputError; matches ErrInvalid too).
	ErrDuplicateTask = errors.New("duplicate task id")
	// ErrPinsExceedWant: the pins name more (non-dedicated) workers than the
	// topology asks for (an *InputError; matches ErrInvalid too).
	ErrPinsExceedWant = errors.New("pins name more workers than asked for")
	// ErrNoWorkers: no live worker at all.
	ErrNoWorkers = errors.New("no live worker")
	// ErrNoFreeSlots: fewer live workers with a free slot than the topology needs
	// (a *SlotsError), or a pinned worker without one (a *PinError).
	ErrNoFreeSlots = errors.New("not enough workers with a free slot")
	// ErrWorkerNotLive: a task is pinned to a worker that is not live (a *PinError).
	ErrWorkerNotLive = errors.New("pinned worker is not live")
	// ErrInvariant: Check found an assignment that breaks an invariant.
	ErrInvariant = errors.New("assignment breaks an invariant")
)

// InputError is malformed input: Err says which kind (ErrInvalid itself, or one of
// ErrEmptyTopology, ErrDuplicateTask, ErrPinsExceedWant) and Detail what exactly,
// as a sentence. It matches both Err and ErrInvalid.
type InputError struct {
	Err    error
	Detail string
}

func (e *InputError) Error() string {
	return "placement: " + e.Detail
}

func (e *InputError) Unwrap() []error {
	if e.Err == ErrInvalid {
		return []error{ErrInvalid}
	}
	return []error{e.Err, ErrInvalid}
}

func invalid(kind error, format string, args ...any) error {
	return &InputError{Err: kind, Detail: fmt.Sprintf(format, args...)}
}

// SlotsError says that a topology needs more workers with a free slot than are live:
// Asked is how many it needs (the wanted number of workers, capped at what its tasks
// can fill), Free names the live workers that have a slot for it (a free one, or one
// that already runs it and keeps its slot), Full the live workers that have none,
// each with the topologies using its slots. Dedicated workers are in neither list: they take
// pinned tasks only. It matches ErrNoFreeSlots.
type SlotsError struct {
	Topology string
	Asked    int
	Free     []string
	Full     []FullWorker
}

// FullWorker is a live worker whose every slot is used by other topologies.
type FullWorker struct {
	Name  string
	Slots int
	Runs  []string
}

func (e *SlotsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "placement: topology %q asks for %d %s, but %d live %s a free slot for it",
		e.Topology, e.Asked, plural(e.Asked, "worker", "workers"), len(e.Free), plural(len(e.Free), "worker has", "workers have"))
	if len(e.Free) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(e.Free, ", "))
	}
	for i, f := range e.Full {
		sep := "; "
		if i > 0 {
			sep = ", "
		}
		fmt.Fprintf(&b, "%s%s is full (%s)", sep, f.Name, slotsUse(f.Slots, f.Runs))
	}
	return b.String()
}

func (e *SlotsError) Is(target error) bool { return target == ErrNoFreeSlots }

// PinError says why a pinned task cannot go to its worker: Err is ErrWorkerNotLive
// or ErrNoFreeSlots (the worker's slots are all used by the topologies in Runs).
type PinError struct {
	Topology string
	Task     int
	Worker   string
	Err      error
	Slots    int
	Runs     []string
}

func (e *PinError) Error() string {
	why := "which is not live"
	if e.Err == ErrNoFreeSlots {
		why = fmt.Sprintf("which has no free slot (%s)", slotsUse(e.Slots, e.Runs))
	}
	return fmt.Sprintf("placement: topology %q: task %d is pinned to worker %q, %s", e.Topology, e.Task, e.Worker, why)
}

func (e *PinError) Unwrap() error { return e.Err }

// slotsUse says what uses a worker's slots: "its 2 slots run a, b", "it has no slots".
func slotsUse(slots int, runs []string) string {
	if slots == 0 {
		return "it has no slots"
	}
	return fmt.Sprintf("its %d %s %s", slots, plural(slots, "slot runs", "slots run"), strings.Join(runs, ", "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
