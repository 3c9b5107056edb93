// Package codec is gale's wire encoding: a compact, versioned binary form of tuple
// values and of transport.Message, so that tuples and acker traffic can leave the
// process, and the hash that fields grouping routes by, so that a key goes to the
// same task in every process.
//
// # Values
//
// A value is a type descriptor followed by a payload. For a scalar the descriptor is
// one tag byte; a composite's descriptor is its tag followed by its element's
// descriptor ([]map[string]int64 is 0x11 0x12 0x08). Integers and lengths are
// varints (encoding/binary: signed ones zigzag), so small numbers take one byte.
//
//	tag   type            payload
//	0x00  nil             none (only as a whole value: an any that holds nothing)
//	0x01  bool            1 byte, 0 or 1
//	0x02  string          uvarint length, bytes
//	0x03  []byte          uvarint length+1 (0: a nil slice), bytes
//	0x04  int             zigzag varint
//	0x05  int8            zigzag varint (range checked on decoding, as below)
//	0x06  int16           zigzag varint
//	0x07  int32           zigzag varint
//	0x08  int64           zigzag varint
//	0x09  uint            uvarint
//	0x0a  uint8           uvarint (a scalar; []uint8 is []byte, tag 0x03)
//	0x0b  uint16          uvarint
//	0x0c  uint32          uvarint
//	0x0d  uint64          uvarint
//	0x0e  float32         4 bytes, IEEE 754 bits, little endian
//	0x0f  float64         8 bytes, IEEE 754 bits, little endian (NaN payloads kept)
//	0x10  time.Time       zigzag varint Unix seconds, uvarint nanoseconds,
//	                      zigzag varint zone offset (seconds east of UTC),
//	                      uvarint length + location name
//	0x11  []E             descriptor: 0x11, E's descriptor
//	                      payload: uvarint count+1 (0: nil), count payloads of E
//	0x12  map[string]E    descriptor: 0x12, E's descriptor
//	                      payload: uvarint count+1 (0: nil), then by ascending key:
//	                      uvarint key length, key, payload of E
//	0x13  any (element)   descriptor of an interface element: each element is a
//	                      whole value (descriptor and payload)
//	0x14  registered      descriptor: 0x14, uvarint name length, name
//	                      payload: uvarint length+1 (0: nil pointer), MarshalBinary bytes
//
// A value decodes to exactly the type it was encoded from: an int stays an int, an
// int64 an int64, a []string a []string, a map[string]any a map[string]any, a nil
// slice or map stays nil and an empty one empty. Only these types are built in, and
// only exactly them: a type defined from one (type Word string) is not, nor is a
// named slice or map type, a struct, a pointer, a func or a chan. Map keys are
// written in ascending order, so equal values have equal encodings.
//
// A time.Time keeps its instant (seconds and nanoseconds) and its location: the name
// and the zone offset at that instant; its monotonic clock reading is dropped. On
// decoding, "UTC" is time.UTC, "Local" is time.Local, another name is loaded with
// time.LoadLocation (cached), and a name that does not load (or the empty name of a
// time.FixedZone("", offset)) becomes time.FixedZone(name, offset).
//
// # User types
//
// Register(name, sample) makes a type encodable when its pointer implements
// encoding.BinaryMarshaler and encoding.BinaryUnmarshaler. A type registered as a
// value T decodes as a T, one registered as *T as a *T. The name travels in the
// descriptor, so every process must register the type under the same name (in an
// init func). A name or a type registered twice is an error.
//
// A value that is not encodable fails AppendValue with an *UnencodableError (it
// matches ErrUnencodable) naming the type and where it is, e.g.
//
//	codec: field "order" (index 1): type *orders.OrderLine is not encodable (register it with codec.Register or send built-in types)
//
// A map with non-string keys, and a value nested deeper than MaxDepth (64) — such as
// a map or slice that contains itself — are not encodable either.
//
// # Frames and versions
//
// A frame holds one transport.Message:
//
//	byte 0   Magic (0xC5)
//	byte 1   Version (2)
//	byte 2   Kind
//	byte 3   sections present: 1 tuples, 2 acks, 4 outcomes, 8 control
//	         (a nil Tuples, Acks or Outcomes is absent; an empty one is present)
//	then     From, To: zigzag varints
//	         Epoch: 8 bytes little endian; Seq, Pos: uvarints
//	tuples   uvarint count, then per tuple:
//	           uvarint stream number (Streams), zigzag varint source task,
//	           zigzag varint destination task (DstTask),
//	           uvarint number of (root, edge) pairs, each 8+8 bytes little endian
//	           (Root0/Edge0 first, then the extra edges),
//	           uvarint number of values, each a value as above, or the byte
//	           0xf0: the very value at the same index of the previous tuple
//	           (see below)
//	acks     uvarint count, then per acker.Msg: Root, Val (8 bytes each),
//	           zigzag varint Task, 1 byte Kind, uvarint length + Reason
//	outcomes uvarint count, then per acker.Outcome: Root (8 bytes), zigzag varint
//	           SpoutTask, 1 byte Result, zigzag varint Latency, uvarint length + Reason
//	control  1 byte Op, uvarint ID, uvarint length+1 (0: nil) + Body
//
// A value that is the very value at the same index of the frame's previous tuple
// (the same interface: dynamic type and data pointer, as when a bolt emits one value
// with several tuples) is written as the one byte 0xf0, and decodes to that tuple's
// decoded value: the receiver shares one value between those tuples, as the sender
// did. Word count's split emits its line's pos ([]uint64 of two) with every word of
// the line; repeated, a word tuple saves pos's bytes (15 or so with a book's
// offsets; the codec benchmark's tuples go from 38 to 32 bytes), and its receiver
// decodes pos once per line rather than once per word. Equal values in separate
// boxes are written in full.
//
// A word-count tuple (one 4-byte word, one root) takes about 28 bytes. A frame of
// another version fails ReadMessage with a *VersionError (matching ErrVersion):
// "codec: frame is version 3, this process speaks version 2". A new version is
// needed for any change to the layout above or to a value's encoding (version 2
// added the 0xf0 repeat).
//
// Streams travel as numbers: NewStreams numbers the tick source 0, then each
// component's streams in the topology's component order, a component's streams by
// id. Every process that builds the same topology has the same numbers, and decoding
// gives tuples the topology's own *tuple.Source, so t.Source() compares with == and
// t.IsTick() works. An unknown number is an error that asks whether both processes
// run the same topology.
//
// # Hostile input
//
// ReadValue and ReadMessage never panic on bad input. Every length is checked
// against the bytes left before anything is allocated (each element takes at least
// one byte), nesting is bounded by MaxDepth, integers are range-checked against their
// type, map keys must ascend, and what decoding allocates is bounded by 64 bytes per
// input byte, plus a few KiB of shared chunks per message (the boxes of its strings,
// numbers and times, and its tuples' value slices). Locations are cached up to 1024 names, so
// random zone names cannot grow the cache without bound; likewise a process builds
// at most MaxShapes slice and map types from the descriptors it receives (Go keeps
// every such type for good), and refuses a new shape past that. A registered type's
// UnmarshalBinary is the user's code and is trusted.
//
// # The fields hash
//
// HashValue(h, v) folds into h, with FNV-1a 64, exactly the bytes AppendValue writes
// for v, except that a float -0.0 (anywhere in v) is hashed as +0.0: -0.0 == 0.0 in
// Go, so they are one key and go to one task, as before. NaNs are hashed by their
// bits: a NaN is never equal to anything, so no grouping promise is at stake, and the
// same bits still go to the same task. Because the hash is of the encoding, it is the
// same in every process and release; a codec version that changes the encoding of a
// type must keep the old bytes for the hash, or it moves keys between tasks and is a
// breaking change (engine/route_golden_test.go pins hashes for fixed keys).
//
// A time.Time is hashed with its location: equal times (== in Go: same instant, same
// location) go to one task whatever their monotonic readings, but one instant in two
// locations is two keys, as it is two values for ==. Group by t.UTC() to group by
// instant. Maps hash the same whatever their iteration order (keys are sorted).
//
// FieldsHash(values, idx) starts from FNVOffset and, for each grouped field, folds
// HashValue and then the separator byte 0xff; last it applies Mix (x ^= x>>33;
// x *= 0xff51afd7ed558ccd; x ^= x>>33), and fields grouping picks
// targets[hash % len(targets)]. Strings, []byte, integers, bools and floats hash
// without allocating; other values are encoded into a pooled buffer first. An
// unencodable key is an error: the emit fails naming the field and type.
package codec
