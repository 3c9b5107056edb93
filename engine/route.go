package engine

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// streamOut is everything a producing task needs to route one of its streams.
type streamOut struct {
	src    *tuple.Source
	direct bool
	routes []*route
	// directTasks are the tasks that consume this stream with direct grouping.
	directTasks map[int]bool
}

// route is one consumer bolt of a stream, as seen by one producing task.
type route struct {
	kind     topology.GroupingKind
	targets  []int // consumer task ids, ascending
	local    []int // the targets in this process (local-or-shuffle)
	fieldIdx []int // fields grouping: indexes into the values
	rr       uint32
	custom   topology.CustomGrouping
	consumer string
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
		h := fnvOffset
		for _, i := range r.fieldIdx {
			h = hashValue(h, values[i])
		}
		return append(dst, r.targets[mix(h)%uint64(len(r.targets))]), nil
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

// fnvOffset is the FNV-1a 64-bit offset basis, the hash of no fields.
const fnvOffset uint64 = 14695981039346656037

// hashValue folds v into an FNV-1a hash. The hash depends only on the value, never on
// the process, so that fields grouping routes the same key to the same task in every
// process (needed once tasks are spread over machines).
func hashValue(h uint64, v any) uint64 {
	const prime = 1099511628211
	switch x := v.(type) {
	case string:
		for i := 0; i < len(x); i++ {
			h = (h ^ uint64(x[i])) * prime
		}
	case []byte:
		for _, b := range x {
			h = (h ^ uint64(b)) * prime
		}
	case int:
		h = hashU64(h, uint64(x))
	case int64:
		h = hashU64(h, uint64(x))
	case int32:
		h = hashU64(h, uint64(x))
	case uint64:
		h = hashU64(h, x)
	case uint32:
		h = hashU64(h, uint64(x))
	case bool:
		if x {
			h = hashU64(h, 1)
		} else {
			h = hashU64(h, 0)
		}
	case float64:
		if x == 0 {
			x = 0 // -0.0 == 0.0: same key, same task
		}
		h = hashU64(h, math.Float64bits(x))
	case nil:
		h = hashU64(h, 0x9e3779b97f4a7c15)
	default:
		f := fnv.New64a()
		fmt.Fprintf(f, "%T:%v", v, v)
		h = hashU64(h, f.Sum64())
	}
	// Separate fields so that ("ab","c") and ("a","bc") differ.
	return (h ^ 0xff) * prime
}

func hashU64(h, x uint64) uint64 {
	const prime = 1099511628211
	for i := 0; i < 8; i++ {
		h = (h ^ (x & 0xff)) * prime
		x >>= 8
	}
	return h
}

// mix spreads the FNV bits so that the low bits used by the modulo are well mixed.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// nonzeroID draws a random 64-bit id; 0 is reserved (it would vanish from an XOR).
func nonzeroID() uint64 {
	for {
		if v := rand.Uint64(); v != 0 {
			return v
		}
	}
}
