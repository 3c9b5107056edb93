package codec

import (
	"encoding/binary"
	"fmt"
	"slices"
	"unsafe"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/internal/tupleinternal"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// Streams numbers the streams of a topology, so that a tuple's stream travels as a
// small number: 0 is the tick source (tuple.TickSource), then every (component,
// stream) in the topology's component order, a component's streams by stream id
// (its declaration order is not kept by the topology). Every process building the
// same topology numbers it the same.
type Streams struct {
	srcs []*tuple.Source
	ids  map[*tuple.Source]uint32
}

// NewStreams numbers the streams of topo (nil: the tick source only).
func NewStreams(topo *topology.Topology) *Streams {
	st := &Streams{srcs: []*tuple.Source{tuple.TickSource}, ids: map[*tuple.Source]uint32{tuple.TickSource: 0}}
	if topo == nil {
		return st
	}
	for _, c := range topo.Components {
		names := make([]string, 0, len(c.Streams))
		for name := range c.Streams {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			src := c.Streams[name].Source
			st.ids[src] = uint32(len(st.srcs))
			st.srcs = append(st.srcs, src)
		}
	}
	return st
}

// ID returns the number of a stream, false if the topology does not declare it.
func (st *Streams) ID(src *tuple.Source) (uint32, bool) {
	id, ok := st.ids[src]
	return id, ok
}

// Source returns the topology's own source of stream id, false if there is none.
func (st *Streams) Source(id uint32) (*tuple.Source, bool) {
	if uint64(id) >= uint64(len(st.srcs)) {
		return nil, false
	}
	return st.srcs[id], true
}

// Len is the number of streams (the tick source included).
func (st *Streams) Len() int { return len(st.srcs) }

// Sections present in a message (the flags byte).
const (
	hasTuples   = 1 << 0
	hasAcks     = 1 << 1
	hasOutcomes = 1 << 2
	hasControl  = 1 << 3
	hasAll      = hasTuples | hasAcks | hasOutcomes | hasControl
)

// stateOf is a tuple's tracking state (as the engine finds it).
func stateOf(t *tuple.Tuple) *tupleinternal.State {
	return (*tupleinternal.State)(unsafe.Add(unsafe.Pointer(t), tupleinternal.StateOffset))
}

func init() {
	t := tuple.New(tuple.TickSource, 0, nil)
	if stateOf(t) != tupleinternal.StateOf.(func(*tuple.Tuple) *tupleinternal.State)(t) {
		panic("codec: tuple state offset mismatch")
	}
}

// AppendMessage appends a frame holding m to dst. Every field of m is encoded; its
// tuples' streams are numbered by st (a stream st does not know is an error). A value
// that cannot be encoded is an error naming the tuple's stream and the field; dst is
// then returned unchanged in length.
func AppendMessage(dst []byte, m *transport.Message, st *Streams) ([]byte, error) {
	n := len(dst)
	out, err := appendMessage(dst, m, st)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

func appendMessage(dst []byte, m *transport.Message, st *Streams) ([]byte, error) {
	var flags byte
	if m.Tuples != nil {
		flags |= hasTuples
	}
	if m.Acks != nil {
		flags |= hasAcks
	}
	if m.Outcomes != nil {
		flags |= hasOutcomes
	}
	if m.Op != 0 || m.ID != 0 || m.Body != nil {
		flags |= hasControl
	}
	dst = append(dst, Magic, Version, byte(m.Kind), flags)
	dst = binary.AppendVarint(dst, int64(m.From))
	dst = binary.AppendVarint(dst, int64(m.To))
	dst = binary.LittleEndian.AppendUint64(dst, m.Epoch)
	dst = binary.AppendUvarint(dst, m.Seq)
	dst = binary.AppendUvarint(dst, m.Pos)
	if flags&hasTuples != 0 {
		if len(m.Tuples) > 0 && st == nil {
			return dst, fmt.Errorf("codec: a message with tuples needs a stream table")
		}
		dst = binary.AppendUvarint(dst, uint64(len(m.Tuples)))
		var last *tuple.Source
		var lastID uint32
		var prev tuple.Values
		for i, t := range m.Tuples {
			src := t.Source()
			if src != last {
				id, ok := st.ID(src)
				if !ok {
					return dst, fmt.Errorf("codec: tuple %d: stream %q of %q is not in the topology's stream table", i, src.Stream, src.Component)
				}
				last, lastID = src, id
			}
			dst = binary.AppendUvarint(dst, uint64(lastID))
			dst = binary.AppendVarint(dst, int64(t.SourceTask()))
			s := stateOf(t)
			dst = binary.AppendVarint(dst, int64(s.DstTask))
			if s.Root0 == 0 {
				dst = append(dst, 0)
			} else {
				more := s.Extra()
				dst = binary.AppendUvarint(dst, uint64(1+len(more)))
				dst = binary.LittleEndian.AppendUint64(dst, s.Root0)
				dst = binary.LittleEndian.AppendUint64(dst, s.Edge0)
				for _, e := range more {
					dst = binary.LittleEndian.AppendUint64(dst, e.Root)
					dst = binary.LittleEndian.AppendUint64(dst, e.Edge)
				}
			}
			var err error
			vals := t.Values()
			if dst, err = appendTupleValues(dst, vals, prev, src.Fields); err != nil {
				return dst, fmt.Errorf("stream %q of %q: %w", src.Stream, src.Component, err)
			}
			prev = vals
		}
	}
	if flags&hasAcks != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(m.Acks)))
		for _, a := range m.Acks {
			dst = binary.LittleEndian.AppendUint64(dst, a.Root)
			dst = binary.LittleEndian.AppendUint64(dst, a.Val)
			dst = binary.AppendVarint(dst, int64(a.Task))
			dst = append(dst, byte(a.Kind))
			dst = appendString(dst, a.Reason)
		}
	}
	if flags&hasOutcomes != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(m.Outcomes)))
		for _, o := range m.Outcomes {
			dst = binary.LittleEndian.AppendUint64(dst, o.Root)
			dst = binary.AppendVarint(dst, int64(o.SpoutTask))
			dst = append(dst, byte(o.Result))
			dst = binary.AppendVarint(dst, o.Latency)
			dst = appendString(dst, o.Reason)
		}
	}
	if flags&hasControl != 0 {
		dst = append(dst, m.Op)
		dst = binary.AppendUvarint(dst, m.ID)
		dst = appendBytes(dst, m.Body)
	}
	return dst, nil
}

// appendTupleValues appends a tuple's values as AppendValues does, except that a
// value that is the very value at the same index of prev (the frame's previous
// tuple's values: the same interface, type and data pointer, as when a bolt emits
// one value with several tuples, like word count's line pos with each word) is
// written as repeatValue. The receiver then shares one decoded value between those
// tuples, as the sender shared one.
func appendTupleValues(dst []byte, values, prev tuple.Values, fields *tuple.Fields) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(values)))
	for i, v := range values {
		if i < len(prev) && sameValue(v, prev[i]) {
			dst = append(dst, repeatValue)
			continue
		}
		var err error
		if dst, err = appendValue(dst, v, 0, false); err != nil {
			return dst, fieldError(err, fields, i)
		}
	}
	return dst, nil
}

// sameValue reports whether a and b are one value: the same dynamic type and the
// same data word (for a boxed value, the same box), not nil. Equal values in two
// boxes are not the same.
func sameValue(a, b any) bool {
	ea, eb := (*eface)(unsafe.Pointer(&a)), (*eface)(unsafe.Pointer(&b))
	return ea.typ != nil && ea.typ == eb.typ && ea.data == eb.data
}

// CheckVersion checks a frame's magic byte and version.
func CheckVersion(src []byte) error {
	if len(src) < 2 {
		return corrupt("a frame of %d bytes", len(src))
	}
	if src[0] != Magic {
		return corrupt("first byte %#x is not the frame magic %#x", src[0], Magic)
	}
	if src[1] != Version {
		return &VersionError{Frame: src[1]}
	}
	return nil
}

// VersionError is the error for a frame of another version; it matches ErrVersion.
type VersionError struct {
	Frame byte // the frame's version
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("codec: frame is version %d, this process speaks version %d", e.Frame, Version)
}

// Is makes errors.Is(err, ErrVersion) true.
func (e *VersionError) Is(target error) bool { return target == ErrVersion }

// ReadMessage decodes a frame made by AppendMessage. src must hold exactly one
// frame. Tuples are rebuilt on st's sources (the topology's own, so t.Source() and
// t.IsTick() work) with their tracking state; the message and its tuples share no
// memory with src. Like ReadValue it never panics on bad input and bounds what it
// allocates by a small multiple of len(src).
func ReadMessage(src []byte, st *Streams) (*transport.Message, error) {
	if err := CheckVersion(src); err != nil {
		return nil, err
	}
	d := decoder{src: src, off: 2, budget: budgetFor(len(src))}
	m, err := d.message(st)
	if err != nil {
		return nil, err
	}
	if d.off != len(src) {
		return nil, corrupt("%d bytes after the message", len(src)-d.off)
	}
	return m, nil
}

func (d *decoder) message(st *Streams) (*transport.Message, error) {
	m := &transport.Message{}
	kind, err := d.byte()
	if err != nil {
		return nil, err
	}
	m.Kind = transport.Kind(kind)
	flags, err := d.byte()
	if err != nil {
		return nil, err
	}
	if flags&^hasAll != 0 {
		return nil, corrupt("unknown section flags %#x", flags)
	}
	from, err := d.varint()
	if err != nil {
		return nil, err
	}
	to, err := d.varint()
	if err != nil {
		return nil, err
	}
	if int64(int32(from)) != from || int64(int32(to)) != to {
		return nil, corrupt("endpoint out of range")
	}
	m.From, m.To = int(from), int(to)
	if m.Epoch, err = d.fixed64(); err != nil {
		return nil, err
	}
	if m.Seq, err = d.uvarint(); err != nil {
		return nil, err
	}
	if m.Pos, err = d.uvarint(); err != nil {
		return nil, err
	}
	if flags&hasTuples != 0 {
		if m.Tuples, err = d.tuples(st); err != nil {
			return nil, err
		}
	}
	if flags&hasAcks != 0 {
		// root, val: 16 bytes; task, kind, reason: 3.
		n, err := d.length(19)
		if err != nil {
			return nil, err
		}
		if err := d.spend(n * 48); err != nil {
			return nil, err
		}
		m.Acks = make([]acker.Msg, n)
		for i := range m.Acks {
			a := &m.Acks[i]
			if a.Root, a.Val, err = d.pair(); err != nil {
				return nil, err
			}
			task, err := d.varint()
			if err != nil {
				return nil, err
			}
			if int64(int32(task)) != task {
				return nil, corrupt("ack task %d out of range", task)
			}
			a.Task = int32(task)
			k, err := d.byte()
			if err != nil {
				return nil, err
			}
			a.Kind = acker.Kind(k)
			if a.Reason, err = d.str(); err != nil {
				return nil, err
			}
		}
	}
	if flags&hasOutcomes != 0 {
		// root: 8 bytes; task, result, latency, reason: 4.
		n, err := d.length(12)
		if err != nil {
			return nil, err
		}
		if err := d.spend(n * 48); err != nil {
			return nil, err
		}
		m.Outcomes = make([]acker.Outcome, n)
		for i := range m.Outcomes {
			o := &m.Outcomes[i]
			if o.Root, err = d.fixed64(); err != nil {
				return nil, err
			}
			task, err := d.varint()
			if err != nil {
				return nil, err
			}
			if int64(int32(task)) != task {
				return nil, corrupt("outcome spout task %d out of range", task)
			}
			o.SpoutTask = int32(task)
			r, err := d.byte()
			if err != nil {
				return nil, err
			}
			o.Result = acker.Result(r)
			if o.Latency, err = d.varint(); err != nil {
				return nil, err
			}
			if o.Reason, err = d.str(); err != nil {
				return nil, err
			}
		}
	}
	if flags&hasControl != 0 {
		if m.Op, err = d.byte(); err != nil {
			return nil, err
		}
		if m.ID, err = d.uvarint(); err != nil {
			return nil, err
		}
		n, err := d.optLength(1)
		if err != nil {
			return nil, err
		}
		if n >= 0 {
			if err := d.spend(n); err != nil {
				return nil, err
			}
			m.Body = append([]byte{}, d.rawBytes(n)...)
		}
	}
	return m, nil
}

// tupleSize is a tuple's size in memory, for the allocation bound.
const tupleSize = int(unsafe.Sizeof(tuple.Tuple{}))

func (d *decoder) tuples(st *Streams) ([]*tuple.Tuple, error) {
	// stream, source task, destination task, edges, values: at least 5 bytes.
	n, err := d.length(5)
	if err != nil {
		return nil, err
	}
	if n > 0 && st == nil {
		return nil, fmt.Errorf("codec: a message with tuples needs a stream table")
	}
	if err := d.spend(n * (8 + tupleSize)); err != nil {
		return nil, err
	}
	type decoded struct {
		src     *tuple.Source
		srcTask int
		vals    tuple.Values
		state   tupleinternal.State
	}
	dec := make([]decoded, n)
	d.ar = &arena{}
	defer func() { d.ar = nil }()
	for i := range dec {
		sid, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if sid > uint64(^uint32(0)) {
			return nil, corrupt("stream number %d out of range", sid)
		}
		src, ok := st.Source(uint32(sid))
		if !ok {
			return nil, fmt.Errorf("%w: tuple %d: stream number %d is not in this topology's stream table (%d streams): do the processes run the same topology?", ErrCorrupt, i, sid, st.Len())
		}
		srcTask, err := d.varint()
		if err != nil {
			return nil, err
		}
		dstTask, err := d.varint()
		if err != nil {
			return nil, err
		}
		if int64(int32(srcTask)) != srcTask || int64(int32(dstTask)) != dstTask {
			return nil, corrupt("task out of range in tuple %d", i)
		}
		ne, err := d.length(16)
		if err != nil {
			return nil, err
		}
		var s tupleinternal.State
		s.DstTask = int32(dstTask)
		if ne > 0 {
			if s.Root0, s.Edge0, err = d.pair(); err != nil {
				return nil, err
			}
			if s.Root0 == 0 {
				return nil, corrupt("tuple %d has root 0", i)
			}
			if ne > 1 {
				if err := d.spend(16*ne + 48); err != nil {
					return nil, err
				}
				more := make([]tupleinternal.Edge, ne-1)
				for j := range more {
					if more[j].Root, more[j].Edge, err = d.pair(); err != nil {
						return nil, err
					}
				}
				s.More = &more
			}
		}
		nv, err := d.length(1)
		if err != nil {
			return nil, err
		}
		if err := d.spend(16 * nv); err != nil {
			return nil, err
		}
		vals := d.values(nv)
		var prev tuple.Values
		if i > 0 {
			prev = dec[i-1].vals
		}
		for j := range vals {
			if d.off < len(d.src) && d.src[d.off] == repeatValue {
				if j >= len(prev) {
					return nil, corrupt("tuple %d, value %d repeats the previous tuple's, which has %d values", i, j, len(prev))
				}
				d.off++
				vals[j] = prev[j]
				continue
			}
			if vals[j], err = d.value(0); err != nil {
				return nil, fmt.Errorf("tuple %d, value %d: %w", i, j, err)
			}
		}
		dec[i] = decoded{src: src, srcTask: int(srcTask), vals: vals, state: s}
	}
	// One allocation for the batch's tuples, not one each.
	out := tuple.NewBatch(n, func(i int) (*tuple.Source, int, tuple.Values) { return dec[i].src, dec[i].srcTask, dec[i].vals })
	for i, t := range out {
		*stateOf(t) = dec[i].state
	}
	return out, nil
}

// Clone returns a copy of m made by encoding and decoding it: what a serialising
// transport delivers (Storm's topology.testing.always.try.serialize).
func Clone(m *transport.Message, st *Streams) (*transport.Message, error) {
	b, err := AppendMessage(nil, m, st)
	if err != nil {
		return nil, err
	}
	return ReadMessage(b, st)
}

// pair reads two fixed 64-bit numbers.
func (d *decoder) pair() (a, b uint64, err error) {
	if d.left() < 16 {
		return 0, 0, corrupt("truncated at byte %d", d.off)
	}
	a = binary.LittleEndian.Uint64(d.src[d.off:])
	b = binary.LittleEndian.Uint64(d.src[d.off+8:])
	d.off += 16
	return a, b, nil
}
