// Package tuple holds the data unit of a topology: Tuple, its Fields and Values.
//
// A tuple is what one task receives: values on a named stream from a source task. If the
// tuple is tracked it belongs to one or more tuple trees, each named by a random 64-bit
// root id; Root and Anchored tell which. Acking, failing and anchoring go through the
// collector of the receiving task, never through the tuple itself.
package tuple

import (
	"fmt"
	"unsafe"

	"github.com/gale-stream/gale/internal/tupleinternal"
)

// DefaultStream is the stream id used when none is named, as in Storm.
const DefaultStream = "default"

// Source describes a stream as seen by its consumers: the component that emits it, the
// stream id and its declared fields. One Source is shared by every tuple of the stream.
type Source struct {
	Component string
	Stream    string
	Fields    *Fields
}

// SystemComponent and TickStream name the source of tick tuples (as Storm's __system
// component and __tick stream).
const (
	SystemComponent = "__system"
	TickStream      = "__tick"
)

// TickSource is the source of every tick tuple. A tick has one field, "time" (a
// time.Time), and is untracked: acking it is allowed and does nothing.
var TickSource = &Source{Component: SystemComponent, Stream: TickStream, Fields: NewFields("time")}

// Tuple is one delivery of values to one task. Tuples are created by the runtime; the
// receiving task may keep a *Tuple (to ack it later, or to join it with another) but
// must not modify its Values.
type Tuple struct {
	src     *Source
	values  Values
	srcTask int32
	state   tupleinternal.State
}

func init() {
	tupleinternal.StateOf = func(t *Tuple) *tupleinternal.State { return &t.state }
	// The state is a field of its Tuple: step back to the Tuple (container_of).
	off := unsafe.Offsetof(Tuple{}.state)
	tupleinternal.StateOffset = off
	tupleinternal.SourceOf = func(s *tupleinternal.State) (string, string, int) {
		t := (*Tuple)(unsafe.Add(unsafe.Pointer(s), -int(off)))
		return t.src.Component, t.src.Stream, int(t.srcTask)
	}
}

// New returns an untracked tuple with the given source and values. The runtime uses it
// for every delivery; tests use it to call a bolt's Execute directly.
func New(src *Source, srcTask int, values Values) *Tuple {
	return &Tuple{src: src, values: values, srcTask: int32(srcTask), state: tupleinternal.State{DstTask: -1}}
}

// NewBatch returns n tuples, as New would make them one by one, in one allocation:
// tuple i has the source, source task and values fill(i) gives. A decoder that
// receives a batch of deliveries pays one allocation instead of n; the batch's
// memory is freed once none of its tuples is referenced.
func NewBatch(n int, fill func(i int) (src *Source, srcTask int, values Values)) []*Tuple {
	slab := make([]Tuple, n)
	out := make([]*Tuple, n)
	for i := range slab {
		src, task, values := fill(i)
		slab[i] = Tuple{src: src, values: values, srcTask: int32(task), state: tupleinternal.State{DstTask: -1}}
		out[i] = &slab[i]
	}
	return out
}

// Slab makes tuples as New does, cutting them from blocks of SlabSize so that a
// runtime emitting many pays one allocation per block instead of one per tuple. A
// tuple is never reused: a block is freed once none of its tuples is referenced, so a
// task that keeps one tuple keeps at most SlabSize tuples' memory alive. The zero
// Slab is ready to use; a Slab is not safe for concurrent use.
type Slab struct{ free []Tuple }

// SlabSize is the number of tuples in one block of a Slab: five 96-byte tuples are
// 480 bytes, under the 512 above which Go adds an 8-byte header to an allocation that
// holds pointers (eight would take an 896-byte size class for 768 bytes).
const SlabSize = 5

// New returns an untracked tuple, as New does.
func (s *Slab) New(src *Source, srcTask int, values Values) *Tuple {
	if len(s.free) == 0 {
		s.free = make([]Tuple, SlabSize)
	}
	t := &s.free[0]
	s.free = s.free[1:]
	// The block was zeroed by make and a tuple is never reused: set only what New
	// sets, field by field (a whole-struct store copies 96 bytes with write barriers).
	t.src, t.values, t.srcTask, t.state.DstTask = src, values, int32(srcTask), -1
	return t
}

// Values returns the values (not a copy; do not modify).
func (t *Tuple) Values() Values { return t.values }

// Len is the number of values.
func (t *Tuple) Len() int { return len(t.values) }

// Value returns the i-th value. It panics if i is out of range, like a slice index.
func (t *Tuple) Value(i int) any { return t.values[i] }

// Lookup returns the value of the named field and whether the stream declares it.
func (t *Tuple) Lookup(field string) (any, bool) {
	i := t.src.Fields.Index(field)
	if i < 0 || i >= len(t.values) {
		return nil, false
	}
	return t.values[i], true
}

// ValueByField returns the value of the named field. Asking for a field the stream does
// not declare is a programming error, as in Storm: it panics with a message naming the
// field, the stream and the declared fields (a BasicBolt turns that into a failed input).
func (t *Tuple) ValueByField(field string) any {
	v, ok := t.Lookup(field)
	if !ok {
		panic(fmt.Sprintf("tuple: stream %q of %q has no field %q (fields %v)", t.src.Stream, t.src.Component, field, t.src.Fields))
	}
	return v
}

// StringByField returns the named field as a string; it panics (as ValueByField) if the
// field is missing or is not a string.
func (t *Tuple) StringByField(field string) string {
	v := t.ValueByField(field)
	s, ok := v.(string)
	if !ok {
		panic(fmt.Sprintf("tuple: field %q of stream %q is %T, not string", field, t.src.Stream, v))
	}
	return s
}

// Fields returns the declared fields of the tuple's stream.
func (t *Tuple) Fields() *Fields { return t.src.Fields }

// SourceComponent is the id of the component that emitted the tuple.
func (t *Tuple) SourceComponent() string { return t.src.Component }

// SourceStream is the stream the tuple was emitted on.
func (t *Tuple) SourceStream() string { return t.src.Stream }

// SourceTask is the global id of the task that emitted the tuple.
func (t *Tuple) SourceTask() int { return int(t.srcTask) }

// Source returns the stream description shared by every tuple of the stream.
func (t *Tuple) Source() *Source { return t.src }

// Task is the global id of the task the tuple was delivered to (-1 if it was not
// delivered by a runtime).
func (t *Tuple) Task() int { return int(t.state.DstTask) }

// IsTick reports whether the tuple is a tick (see topology's Declarer.TickEvery), as
// Storm's TupleUtils.isTick.
func (t *Tuple) IsTick() bool { return t.src == TickSource }

// Anchored reports whether the tuple belongs to at least one tuple tree.
func (t *Tuple) Anchored() bool { return t.state.Root0 != 0 }

// Root returns the root id of the first tree the tuple belongs to, 0 if untracked.
// Use it to follow one tree through the logs.
func (t *Tuple) Root() uint64 { return t.state.Root0 }

// Roots returns the root ids of every tree the tuple belongs to (several after a
// multi-anchored emit).
func (t *Tuple) Roots() []uint64 {
	var out []uint64
	t.state.Edges(func(r, _ uint64) { out = append(out, r) })
	return out
}

func (t *Tuple) String() string {
	return fmt.Sprintf("%s:%d/%s root=%016x %v", t.src.Component, t.srcTask, t.src.Stream, t.state.Root0, t.values)
}
