package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// streamOut is everything a producing task needs to route one of its streams.
type streamOut struct {
	src    *tuple.Source
	direct bool
	routes []*route
	// directComps are the components that consume this stream with direct grouping
	// (a set of components, not of tasks: it is made for every producing task).
	directComps map[string]bool
}

// route is one consumer bolt of a stream, as seen by one producing task.
type route struct {
	kind     topology.GroupingKind
	targets  []int // consumer task ids, ascending
	local    []int // the targets this engine hosts (local-or-shuffle; shared, never modified)
	fieldIdx []int // fields grouping: indexes into the values
	// fieldNames are the grouping's field names (parallel to fieldIdx), for errors;
	// without them an error names the field by its index only.
	fieldNames []string
	rr         uint32
	custom     topology.CustomGrouping
	consumer   string
}

// choose appends the target tasks for values to dst.
func (r *route) choose(values tuple.Values, dst []int) ([]int, error) {
	switch r.kind {
	case topology.ShuffleKind, topology.NoneKind:
		r.rr++
		return append(dst, r.targets[r.rr%uint32(len(r.targets))]), nil
	case topology.LocalOrShuffleKind:
		pool := r.local
		if len(pool) == 0 {
			pool = r.targets
		}
		r.rr++
		return append(dst, pool[r.rr%uint32(len(pool))]), nil
	case topology.FieldsKind:
		h, err := codec.FieldsHash(values, r.fieldIdx)
		if err != nil {
			return dst, r.fieldsError(err)
		}
		return append(dst, r.targets[h%uint64(len(r.targets))]), nil
	case topology.AllKind:
		return append(dst, r.targets...), nil
	case topology.GlobalKind:
		return append(dst, r.targets[0]), nil
	case topology.CustomKind:
		n := len(dst)
		dst = r.custom.ChooseTasks(values, dst)
		for _, t := range dst[n:] {
			if _, ok := slices.BinarySearch(r.targets, t); !ok {
				return dst[:n], fmt.Errorf("custom grouping to %q chose task %d, not one of %v", r.consumer, t, r.targets)
			}
		}
		return dst, nil
	}
	return dst, nil // direct: only EmitDirect reaches a direct consumer
}

// fieldsError says which grouped field of a fields grouping cannot be hashed (its
// value is not encodable: see package codec).
func (r *route) fieldsError(err error) error {
	var ue *codec.UnencodableError
	if errors.As(err, &ue) && ue.Field == "" {
		for k, i := range r.fieldIdx {
			if i == ue.Index && k < len(r.fieldNames) {
				ue.Field = r.fieldNames[k]
			}
		}
	}
	return fmt.Errorf("fields grouping to %q: %w", r.consumer, err)
}

// Fields grouping routes a tuple to targets[codec.FieldsHash(values, fieldIdx) %
// len(targets)]: the hash of the values' encoding, the same in every process and
// release (route_golden_test.go pins it).

// nonzeroID draws a random 64-bit id; 0 is reserved (it would vanish from an XOR).
func nonzeroID() uint64 {
	for {
		if v := rand.Uint64(); v != 0 {
			return v
		}
	}
}
