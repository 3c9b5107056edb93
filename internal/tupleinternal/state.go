// Package tupleinternal holds the per-delivery tracking state that the runtime keeps
// inside every tuple. It lives in an internal package so that user code cannot reach
// it: only the runtime may mark a tuple acked or failed, or add child edges to it.
package tupleinternal

// Status of a delivered tuple, as seen by the task that received it.
const (
	Pending uint8 = iota // neither acked nor failed yet
	Acked                // the receiving task acked it
	Failed               // the receiving task failed it
)

// Held values.
const (
	NotHeld    uint8 = iota
	HeldListed       // pending after its batch: in the task's held list
)

// Edge is one (root id, edge id) pair of a tuple: the tuple belongs to the tree rooted
// at Root, and Edge is the XOR of the edge ids that joined it to that tree (Storm's
// MessageId map entry).
type Edge struct {
	Root uint64
	Edge uint64
}

// State is the tracking state of one delivered tuple. AckVal and Status are guarded by
// the receiving task's collector mutex: the collector may be used from other goroutines
// (async acks), and an emit anchored to the tuple must never race with its ack
// (streamparse#325, R3); only the receiving task may ack, fail or anchor to it.
type State struct {
	// AckVal is the XOR of the edge ids of every child anchored to this tuple.
	AckVal uint64
	Status uint8
	// Held says whether the tuple is in the receiving bolt task's held list (next to
	// Status: no padding).
	Held uint8
	// DstTask is the task the tuple was delivered to; acking it elsewhere is misuse.
	DstTask int32
	// First edge inline (one root is the common case), others in More: a pointer,
	// because a slice header would add 16 bytes to every tuple for a rare case.
	Root0, Edge0 uint64
	More         *[]Edge
	// ExecStart is when the receiving task began executing the tuple (runtime clock,
	// ns): the start of its process latency, and "held since" for a stuck tree.
	ExecStart int64
	// HeldIdx is the tuple's index in its bolt task's held list (when Held is set).
	HeldIdx int32
}

// LineageID names the tuple in the lineage of its sampled trees: its first edge id,
// random and fixed once the tuple is made.
func (s *State) LineageID() uint64 { return s.Edge0 }

// Extra returns the edges of roots after the first (nil for most tuples).
func (s *State) Extra() []Edge {
	if s.More == nil {
		return nil
	}
	return *s.More
}

// Edges calls fn for every (root, edge) pair of the tuple.
func (s *State) Edges(fn func(root, edge uint64)) {
	if s.Root0 == 0 {
		return
	}
	fn(s.Root0, s.Edge0)
	for _, e := range s.Extra() {
		fn(e.Root, e.Edge)
	}
}

// StateOffset is the offset of the State inside a tuple.Tuple, set by package tuple:
// the runtime finds a tuple's state with one add (inlined), not a call.
var StateOffset uintptr

// StateOf is set by package tuple to a func(*tuple.Tuple) *State. It is typed any to
// avoid an import cycle; the runtime asserts it once at start.
var StateOf any

// SourceOf is set by package tuple to a func(*State) (component, stream string,
// srcTask int) giving the source of the tuple that holds the state (typed any for the
// same reason as StateOf).
var SourceOf any
