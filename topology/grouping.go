package topology

import (
	"fmt"

	"github.com/gale-stream/gale/tuple"
)

// GroupingKind names a stream grouping (Storm's built-in groupings plus custom).
type GroupingKind uint8

// Groupings.
const (
	ShuffleKind        GroupingKind = iota + 1 // random, evenly spread
	FieldsKind                                 // hash of the named fields: same key, same task
	AllKind                                    // a copy to every task (one edge each)
	GlobalKind                                 // every tuple to the task with the lowest id
	DirectKind                                 // the producer picks the task with EmitDirect
	LocalOrShuffleKind                         // shuffle among tasks in this process, if any
	NoneKind                                   // no preference: the same as shuffle
	CustomKind                                 // user code picks
)

func (k GroupingKind) String() string {
	names := [...]string{"none-given", "shuffle", "fields", "all", "global", "direct", "local-or-shuffle", "none", "custom"}
	if int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("grouping(%d)", uint8(k))
}

// Grouping says how a stream's tuples are spread over a consumer's tasks.
type Grouping struct {
	Kind   GroupingKind
	Fields []string              // FieldsKind
	Custom func() CustomGrouping // CustomKind: one instance per producing task
}

// CustomGrouping is user routing, as Storm's CustomStreamGrouping. Each producing task
// gets its own instance (so it needs no locks).
type CustomGrouping interface {
	// Prepare is called once with the stream and the consumer's task ids.
	Prepare(stream *tuple.Source, targets []int) error
	// ChooseTasks appends the target tasks for values to dst and returns it. Every
	// returned task must be one of the targets.
	ChooseTasks(values tuple.Values, dst []int) []int
}

// Shuffle spreads tuples evenly at random.
func Shuffle() Grouping { return Grouping{Kind: ShuffleKind} }

// Fields sends tuples with equal values of the named fields to the same task.
func Fields(fields ...string) Grouping {
	return Grouping{Kind: FieldsKind, Fields: append([]string(nil), fields...)}
}

// All sends a copy of every tuple to every task.
func All() Grouping { return Grouping{Kind: AllKind} }

// Global sends every tuple to the consumer task with the lowest id.
func Global() Grouping { return Grouping{Kind: GlobalKind} }

// Direct lets the producer choose the task (EmitDirect); the stream must be direct.
func Direct() Grouping { return Grouping{Kind: DirectKind} }

// LocalOrShuffle prefers tasks in the same process (all of them, in local mode).
func LocalOrShuffle() Grouping { return Grouping{Kind: LocalOrShuffleKind} }

// None declares no preference; it behaves as Shuffle.
func None() Grouping { return Grouping{Kind: NoneKind} }

// Custom routes with user code; factory is called once per producing task.
func Custom(factory func() CustomGrouping) Grouping {
	return Grouping{Kind: CustomKind, Custom: factory}
}
