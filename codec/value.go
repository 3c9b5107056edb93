package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gale-stream/gale/tuple"
)

// Version is the version of the encoding this process speaks. It is the second byte
// of every frame. Version 2 added the repeat marker (repeatValue) to a frame's
// tuples.
const Version = 2

// Magic is the first byte of every frame.
const Magic = 0xC5

// MaxDepth bounds the nesting of a value (slices and maps inside slices and maps,
// including the descriptors of their types). A value deeper than this, such as a map
// that contains itself, is not encodable, and an input deeper than this is refused.
const MaxDepth = 64

// maxNameLen bounds a registered name and a time zone name.
const maxNameLen = 255

// Type tags: the first byte of a value, and the bytes of a type descriptor.
const (
	tagNil     = 0x00 // no payload (an any that holds nothing)
	tagBool    = 0x01 // 1 byte: 0 or 1
	tagString  = 0x02 // uvarint length, bytes
	tagBytes   = 0x03 // uvarint length+1 (0: nil), bytes
	tagInt     = 0x04 // zigzag varint (int, int8 ... int64 below)
	tagInt8    = 0x05
	tagInt16   = 0x06
	tagInt32   = 0x07
	tagInt64   = 0x08
	tagUint    = 0x09 // uvarint (uint, uint8 ... uint64 below)
	tagUint8   = 0x0a
	tagUint16  = 0x0b
	tagUint32  = 0x0c
	tagUint64  = 0x0d
	tagFloat32 = 0x0e // 4 bytes, IEEE 754 bits, little endian
	tagFloat64 = 0x0f // 8 bytes, IEEE 754 bits, little endian
	tagTime    = 0x10 // zigzag varint unix seconds, uvarint nanoseconds, zigzag varint zone offset (s), uvarint length + location name
	tagSlice   = 0x11 // descriptor: then the element's descriptor; payload: uvarint count+1 (0: nil), element payloads
	tagMap     = 0x12 // descriptor: then the value's descriptor; payload: uvarint count+1 (0: nil), (uvarint key length, key, value payload) by ascending key
	tagAny     = 0x13 // descriptor of an interface element (any): each element is a whole value
	tagUser    = 0x14 // descriptor: then uvarint name length, name; payload: uvarint length+1 (0: nil pointer), MarshalBinary bytes
	tagMax     = tagUser
	// repeatValue, in a frame's tuples only, stands for a whole value that is the
	// very value (the same interface: type and data pointer) at the same index of
	// the previous tuple of the frame: the decoder hands the previous tuple's
	// decoded value again. It is not a tag of ReadValue's values.
	repeatValue = 0xf0
)

// Errors.
var (
	// ErrVersion is matched (errors.Is) by the error for a frame of another
	// version, a *VersionError.
	ErrVersion = errors.New("codec: frame of another version")
	// ErrUnencodable is matched (errors.Is) by the error for a value the codec cannot
	// encode; the error itself is an *UnencodableError.
	ErrUnencodable = errors.New("codec: value is not encodable")
	// ErrCorrupt is wrapped by every error for input that is not a valid encoding.
	ErrCorrupt = errors.New("codec: corrupt input")
)

// UnencodableError says which value could not be encoded and why. It matches
// ErrUnencodable with errors.Is.
type UnencodableError struct {
	// Field and Index name the tuple field (AppendValues, AppendMessage); Index is -1
	// when the value is not a field.
	Field string
	Index int
	// Path is where inside the value, e.g. `["lines"][2]` (empty: the value itself).
	Path string
	// Type is the Go type that cannot be encoded.
	Type string
	// Reason says why, and what to do.
	Reason string
	// Err is the cause, if any (a MarshalBinary error).
	Err error
}

func (e *UnencodableError) Error() string {
	var b strings.Builder
	b.WriteString("codec: ")
	if e.Index >= 0 {
		if e.Field != "" {
			fmt.Fprintf(&b, "field %q (index %d): ", e.Field, e.Index)
		} else {
			fmt.Fprintf(&b, "value %d: ", e.Index)
		}
	}
	if e.Path != "" {
		fmt.Fprintf(&b, "at %s: ", e.Path)
	}
	fmt.Fprintf(&b, "type %s is not encodable", e.Type)
	if e.Reason != "" {
		fmt.Fprintf(&b, " (%s)", e.Reason)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrUnencodable) true.
func (e *UnencodableError) Is(target error) bool { return target == ErrUnencodable }

// Unwrap returns the cause (a MarshalBinary error), if any.
func (e *UnencodableError) Unwrap() error { return e.Err }

const reasonRegister = "register it with codec.Register or send built-in types"

func unencodable(t reflect.Type, reason string) *UnencodableError {
	name := "<nil>"
	if t != nil {
		name = t.String()
	}
	return &UnencodableError{Index: -1, Type: name, Reason: reason}
}

// atPath prefixes seg to the path of an *UnencodableError (other errors pass).
func atPath(err error, seg string) error {
	var ue *UnencodableError
	if errors.As(err, &ue) {
		ue.Path = seg + ue.Path
	}
	return err
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// ---- encoding ----

// AppendValue appends the encoding of v (its type descriptor, then its payload) to dst.
// See the package documentation for the built-in types. A value of any other type,
// unless registered (Register), is an error matching ErrUnencodable; dst is then
// returned unchanged in length.
func AppendValue(dst []byte, v any) ([]byte, error) {
	n := len(dst)
	out, err := appendValue(dst, v, 0, false)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

// AppendValues appends a tuple's values: their count, then each value. An error names
// the field (from fields, if given) and its index.
func AppendValues(dst []byte, values tuple.Values, fields *tuple.Fields) ([]byte, error) {
	n := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(values)))
	for i, v := range values {
		var err error
		if dst, err = appendValue(dst, v, 0, false); err != nil {
			return dst[:n], fieldError(err, fields, i)
		}
	}
	return dst, nil
}

// fieldError names field i in an *UnencodableError.
func fieldError(err error, fields *tuple.Fields, i int) error {
	var ue *UnencodableError
	if errors.As(err, &ue) {
		ue.Index = i
		if i < fields.Len() {
			ue.Field = fields.Names()[i]
		}
	}
	return err
}

// appendValue appends v's descriptor and payload. norm replaces -0.0 by +0.0 (for
// the hash).
func appendValue(dst []byte, v any, depth int, norm bool) ([]byte, error) {
	// The decoder refuses any value this deep (decoder.value): so does the encoder, so
	// that nothing is sent that no process can read.
	if depth >= MaxDepth {
		return dst, tooDeep(reflect.TypeOf(v))
	}
	switch x := v.(type) {
	case nil:
		return append(dst, tagNil), nil
	case string:
		dst = append(dst, tagString)
		dst = binary.AppendUvarint(dst, uint64(len(x)))
		return append(dst, x...), nil
	case []byte:
		return appendBytes(append(dst, tagBytes), x), nil
	case bool:
		return append(dst, tagBool, b2u8(x)), nil
	case int:
		return binary.AppendVarint(append(dst, tagInt), int64(x)), nil
	case int64:
		return binary.AppendVarint(append(dst, tagInt64), x), nil
	case int32:
		return binary.AppendVarint(append(dst, tagInt32), int64(x)), nil
	case int16:
		return binary.AppendVarint(append(dst, tagInt16), int64(x)), nil
	case int8:
		return binary.AppendVarint(append(dst, tagInt8), int64(x)), nil
	case uint:
		return binary.AppendUvarint(append(dst, tagUint), uint64(x)), nil
	case uint64:
		return binary.AppendUvarint(append(dst, tagUint64), x), nil
	case uint32:
		return binary.AppendUvarint(append(dst, tagUint32), uint64(x)), nil
	case uint16:
		return binary.AppendUvarint(append(dst, tagUint16), uint64(x)), nil
	case uint8:
		return binary.AppendUvarint(append(dst, tagUint8), uint64(x)), nil
	case float64:
		if norm && x == 0 {
			x = 0
		}
		return binary.LittleEndian.AppendUint64(append(dst, tagFloat64), math.Float64bits(x)), nil
	case float32:
		if norm && x == 0 {
			x = 0
		}
		return binary.LittleEndian.AppendUint32(append(dst, tagFloat32), math.Float32bits(x)), nil
	case time.Time:
		return appendTime(append(dst, tagTime), x), nil
	case []string:
		if depth+1 >= MaxDepth { // its elements are a level deeper, as in makeDesc
			return dst, tooDeep(reflect.TypeOf(v))
		}
		dst = append(dst, tagSlice, tagString)
		if x == nil {
			return append(dst, 0), nil
		}
		dst = binary.AppendUvarint(dst, uint64(len(x))+1)
		for _, s := range x {
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		}
		return dst, nil
	case []uint64:
		// The number slices the decoder reads without reflection (numSlice), encoded
		// without it too, exactly as appendDesc and appendPayload would: word count's
		// pos []uint64 took about 5% of a worker's CPU through reflect.
		if depth+1 >= MaxDepth {
			return dst, tooDeep(reflect.TypeOf(v))
		}
		dst, n := appendNumSliceHead(append(dst, tagSlice, tagUint64), x == nil, len(x))
		for _, e := range x[:n] {
			dst = binary.AppendUvarint(dst, e)
		}
		return dst, nil
	case []int64:
		if depth+1 >= MaxDepth {
			return dst, tooDeep(reflect.TypeOf(v))
		}
		dst, n := appendNumSliceHead(append(dst, tagSlice, tagInt64), x == nil, len(x))
		for _, e := range x[:n] {
			dst = binary.AppendVarint(dst, e)
		}
		return dst, nil
	case []int:
		if depth+1 >= MaxDepth {
			return dst, tooDeep(reflect.TypeOf(v))
		}
		dst, n := appendNumSliceHead(append(dst, tagSlice, tagInt), x == nil, len(x))
		for _, e := range x[:n] {
			dst = binary.AppendVarint(dst, int64(e))
		}
		return dst, nil
	case []float64:
		if depth+1 >= MaxDepth {
			return dst, tooDeep(reflect.TypeOf(v))
		}
		dst, n := appendNumSliceHead(append(dst, tagSlice, tagFloat64), x == nil, len(x))
		for _, e := range x[:n] {
			if norm && e == 0 {
				e = 0
			}
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(e))
		}
		return dst, nil
	case []any:
		dst = append(dst, tagSlice, tagAny)
		return appendAnySlice(dst, x, depth+1, norm)
	case map[string]any:
		dst = append(dst, tagMap, tagAny)
		return appendAnyMap(dst, x, depth+1, norm)
	}
	rv := reflect.ValueOf(v)
	t := rv.Type()
	var err error
	if dst, err = appendDesc(dst, t, depth); err != nil {
		return dst, err
	}
	return appendPayload(dst, rv, depth, norm)
}

// appendNumSliceHead appends a slice payload's count (count+1, 0 for nil) and
// returns how many elements follow.
func appendNumSliceHead(dst []byte, isNil bool, n int) ([]byte, int) {
	if isNil {
		return append(dst, 0), 0
	}
	return binary.AppendUvarint(dst, uint64(n)+1), n
}

func b2u8(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func tooDeep(t reflect.Type) *UnencodableError {
	return unencodable(t, fmt.Sprintf("nested deeper than %d: does the value contain itself?", MaxDepth))
}

func appendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendTime appends a time's payload: its instant and its location (name and the
// zone offset at that instant); the monotonic reading is dropped.
func appendTime(dst []byte, t time.Time) []byte {
	dst = binary.AppendVarint(dst, t.Unix())
	dst = binary.AppendUvarint(dst, uint64(t.Nanosecond()))
	_, off := t.Zone()
	dst = binary.AppendVarint(dst, int64(off))
	return appendString(dst, t.Location().String())
}

func appendAnySlice(dst []byte, x []any, depth int, norm bool) ([]byte, error) {
	if x == nil {
		return append(dst, 0), nil
	}
	dst = binary.AppendUvarint(dst, uint64(len(x))+1)
	for i, e := range x {
		var err error
		if dst, err = appendValue(dst, e, depth, norm); err != nil {
			return dst, atPath(err, "["+strconv.Itoa(i)+"]")
		}
	}
	return dst, nil
}

func appendAnyMap(dst []byte, m map[string]any, depth int, norm bool) ([]byte, error) {
	if m == nil {
		return append(dst, 0), nil
	}
	dst = binary.AppendUvarint(dst, uint64(len(m))+1)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		dst = appendString(dst, k)
		var err error
		if dst, err = appendValue(dst, m[k], depth, norm); err != nil {
			return dst, atPath(err, "["+strconv.Quote(k)+"]")
		}
	}
	return dst, nil
}

var (
	typAny    = reflect.TypeFor[any]()
	typString = reflect.TypeFor[string]()
	typTime   = reflect.TypeFor[time.Time]()
	typBytes  = reflect.TypeFor[[]byte]()
)

// scalarTags maps each built-in scalar type (exactly that type, not a type defined
// from it) to its tag.
var scalarTags = map[reflect.Type]byte{
	reflect.TypeFor[bool]():    tagBool,
	typString:                  tagString,
	typBytes:                   tagBytes,
	reflect.TypeFor[int]():     tagInt,
	reflect.TypeFor[int8]():    tagInt8,
	reflect.TypeFor[int16]():   tagInt16,
	reflect.TypeFor[int32]():   tagInt32,
	reflect.TypeFor[int64]():   tagInt64,
	reflect.TypeFor[uint]():    tagUint,
	reflect.TypeFor[uint8]():   tagUint8,
	reflect.TypeFor[uint16]():  tagUint16,
	reflect.TypeFor[uint32]():  tagUint32,
	reflect.TypeFor[uint64]():  tagUint64,
	reflect.TypeFor[float32](): tagFloat32,
	reflect.TypeFor[float64](): tagFloat64,
	typTime:                    tagTime,
}

// tagTypes is the reverse of scalarTags.
var tagTypes [tagMax + 1]reflect.Type

func init() {
	for t, tag := range scalarTags {
		tagTypes[tag] = t
	}
}

// descCache holds the descriptor of each composite type met (reflect.Type ->
// *cachedDesc).
var descCache sync.Map

// cachedDesc is a type's descriptor and its composite levels: written at depth d, the
// type's innermost element is at d+levels, which must stay below MaxDepth wherever
// the descriptor is used (the decoder counts it so), not only where it was made.
type cachedDesc struct {
	desc   []byte
	levels int
}

// appendDesc appends t's type descriptor, or fails if t is not encodable.
func appendDesc(dst []byte, t reflect.Type, depth int) ([]byte, error) {
	if c, ok := descCache.Load(t); ok {
		c := c.(*cachedDesc)
		if depth+c.levels >= MaxDepth {
			return dst, tooDeep(t)
		}
		return append(dst, c.desc...), nil
	}
	d, err := makeDesc(nil, t, t, depth)
	if err != nil {
		return dst, err
	}
	levels := 0 // as makeDesc descends
	for e := t; e != typAny && registered(e) == nil && e.Name() == "" && (e.Kind() == reflect.Slice || e.Kind() == reflect.Map); e = e.Elem() {
		if _, scalar := scalarTags[e]; scalar {
			break
		}
		levels++
	}
	descCache.Store(t, &cachedDesc{desc: d, levels: levels})
	return append(dst, d...), nil
}

func makeDesc(dst []byte, t, outer reflect.Type, depth int) ([]byte, error) {
	if depth >= MaxDepth {
		return dst, tooDeep(outer)
	}
	if tag, ok := scalarTags[t]; ok {
		return append(dst, tag), nil
	}
	if ut := registered(t); ut != nil {
		return appendString(append(dst, tagUser), ut.name), nil
	}
	switch {
	case t == typAny:
		return append(dst, tagAny), nil
	case t.Kind() == reflect.Slice && t.Name() == "":
		return makeDesc(append(dst, tagSlice), t.Elem(), outer, depth+1)
	case t.Kind() == reflect.Map && t.Name() == "":
		if t.Key() != typString {
			return dst, unencodable(outer, "maps must have string keys")
		}
		return makeDesc(append(dst, tagMap), t.Elem(), outer, depth+1)
	}
	reason := reasonRegister
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		reason = "functions, channels and unsafe pointers cannot leave the process"
	}
	ue := unencodable(t, reason)
	if t != outer {
		ue.Type = t.String() + " (in " + outer.String() + ")"
	}
	return dst, ue
}

// appendPayload appends the payload of rv, whose type's descriptor is encodable.
func appendPayload(dst []byte, rv reflect.Value, depth int, norm bool) ([]byte, error) {
	t := rv.Type()
	if tag, ok := scalarTags[t]; ok {
		return appendScalar(dst, tag, rv, norm), nil
	}
	if ut := registered(t); ut != nil {
		return ut.marshal(dst, rv)
	}
	if depth >= MaxDepth {
		return dst, tooDeep(t)
	}
	switch t.Kind() {
	case reflect.Interface:
		return appendValue(dst, rv.Interface(), depth+1, norm)
	case reflect.Slice:
		if rv.IsNil() {
			return append(dst, 0), nil
		}
		n := rv.Len()
		dst = binary.AppendUvarint(dst, uint64(n)+1)
		for i := range n {
			var err error
			if dst, err = appendPayload(dst, rv.Index(i), depth+1, norm); err != nil {
				return dst, atPath(err, "["+strconv.Itoa(i)+"]")
			}
		}
		return dst, nil
	case reflect.Map:
		if rv.IsNil() {
			return append(dst, 0), nil
		}
		keys := rv.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		dst = binary.AppendUvarint(dst, uint64(len(keys))+1)
		for _, k := range keys {
			dst = appendString(dst, k.String())
			var err error
			if dst, err = appendPayload(dst, rv.MapIndex(k), depth+1, norm); err != nil {
				return dst, atPath(err, "["+strconv.Quote(k.String())+"]")
			}
		}
		return dst, nil
	}
	return dst, unencodable(t, reasonRegister)
}

func appendScalar(dst []byte, tag byte, rv reflect.Value, norm bool) []byte {
	switch tag {
	case tagBool:
		return append(dst, b2u8(rv.Bool()))
	case tagString:
		return appendString(dst, rv.String())
	case tagBytes:
		return appendBytes(dst, rv.Bytes())
	case tagInt, tagInt8, tagInt16, tagInt32, tagInt64:
		return binary.AppendVarint(dst, rv.Int())
	case tagUint, tagUint8, tagUint16, tagUint32, tagUint64:
		return binary.AppendUvarint(dst, rv.Uint())
	case tagFloat32:
		f := float32(rv.Float())
		if norm && f == 0 {
			f = 0
		}
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
	case tagFloat64:
		f := rv.Float()
		if norm && f == 0 {
			f = 0
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f))
	case tagTime:
		return appendTime(dst, rv.Interface().(time.Time))
	}
	panic("codec: unknown scalar tag")
}

// ---- decoding ----

// ReadValue decodes one value from the start of src and returns it with the number of
// bytes read. It never panics on bad input: every length is checked against the bytes
// left, nesting is bounded by MaxDepth, and what it allocates is bounded by a small
// multiple of len(src).
func ReadValue(src []byte) (v any, n int, err error) {
	d := decoder{src: src, budget: budgetFor(len(src))}
	v, err = d.value(0)
	if err != nil {
		return nil, 0, err
	}
	return v, d.off, nil
}

// allocFactor bounds what decoding allocates: allocFactor bytes per input byte, plus
// allocSlack.
const (
	allocFactor = 64
	allocSlack  = 4096
)

func budgetFor(n int) int { return n*allocFactor + allocSlack }

type decoder struct {
	src    []byte
	off    int
	budget int    // bytes decoding may still allocate
	ar     *arena // message decoding: values boxed in shared chunks
}

func (d *decoder) left() int { return len(d.src) - d.off }

func (d *decoder) spend(n int) error {
	d.budget -= n
	if d.budget < 0 {
		return corrupt("decoded size exceeds %d bytes per input byte", allocFactor)
	}
	return nil
}

func (d *decoder) byte() (byte, error) {
	if d.off >= len(d.src) {
		return 0, corrupt("truncated at byte %d", d.off)
	}
	b := d.src[d.off]
	d.off++
	return b, nil
}

func (d *decoder) uvarint() (uint64, error) {
	x, n := binary.Uvarint(d.src[d.off:])
	if n <= 0 {
		return 0, corrupt("bad varint at byte %d", d.off)
	}
	d.off += n
	return x, nil
}

func (d *decoder) varint() (int64, error) {
	x, n := binary.Varint(d.src[d.off:])
	if n <= 0 {
		return 0, corrupt("bad varint at byte %d", d.off)
	}
	d.off += n
	return x, nil
}

func (d *decoder) fixed64() (uint64, error) {
	if d.left() < 8 {
		return 0, corrupt("truncated at byte %d", d.off)
	}
	x := binary.LittleEndian.Uint64(d.src[d.off:])
	d.off += 8
	return x, nil
}

// length reads a length of items each taking at least min bytes, and checks it
// against the bytes left.
func (d *decoder) length(min int) (int, error) {
	at := d.off
	x, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if left := uint64(d.left()); x > left || x*uint64(min) > left {
		return 0, corrupt("length %d at byte %d exceeds the %d bytes left", x, at, d.left())
	}
	return int(x), nil
}

// optLength reads a length+1 (0: nil) as length does; n is -1 for nil.
func (d *decoder) optLength(min int) (int, error) {
	at := d.off
	x, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if x == 0 {
		return -1, nil
	}
	if left := uint64(d.left()); x-1 > left || (x-1)*uint64(min) > left {
		return 0, corrupt("length %d at byte %d exceeds the %d bytes left", x-1, at, d.left())
	}
	return int(x - 1), nil
}

func (d *decoder) rawBytes(n int) []byte {
	b := d.src[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

func (d *decoder) str() (string, error) {
	n, err := d.length(1)
	if err != nil {
		return "", err
	}
	if err := d.spend(n); err != nil {
		return "", err
	}
	return string(d.rawBytes(n)), nil
}

// value decodes a whole value: a descriptor, then its payload.
func (d *decoder) value(depth int) (any, error) {
	if depth >= MaxDepth {
		return nil, corrupt("nested deeper than %d at byte %d", MaxDepth, d.off)
	}
	tag, err := d.byte()
	if err != nil {
		return nil, err
	}
	switch tag {
	case tagNil:
		return nil, nil
	case tagString:
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return d.boxString(s), nil
	case tagSlice, tagMap:
		if d.left() > 0 {
			sub := d.src[d.off]
			switch {
			case tag == tagSlice && sub == tagAny:
				d.off++
				return d.anySlice(depth + 1)
			case tag == tagMap && sub == tagAny:
				d.off++
				return d.anyMap(depth + 1)
			case tag == tagSlice && (sub == tagString || sub == tagUint64 || sub == tagInt64 || sub == tagInt || sub == tagFloat64) && depth+1 >= MaxDepth:
				// The fast paths below: their elements are a level deeper, as desc counts them.
				return nil, corrupt("nested deeper than %d at byte %d", MaxDepth, d.off)
			case tag == tagSlice && sub == tagString:
				d.off++
				return d.stringSlice()
			case tag == tagSlice && sub == tagUint64:
				d.off++
				return numSlice(d, d.uvarint)
			case tag == tagSlice && sub == tagInt64:
				d.off++
				return numSlice(d, d.varint)
			case tag == tagSlice && sub == tagInt:
				d.off++
				return numSlice(d, d.int)
			case tag == tagSlice && sub == tagFloat64:
				d.off++
				return numSlice(d, d.float64)
			}
		}
	}
	if tag <= tagTime {
		return d.scalar(tag)
	}
	d.off--
	t, err := d.desc(depth)
	if err != nil {
		return nil, err
	}
	rv, err := d.payload(t, depth)
	if err != nil {
		return nil, err
	}
	return rv.Interface(), nil
}

// scalar decodes the payload of a scalar tag (not nil).
func (d *decoder) scalar(tag byte) (any, error) {
	switch tag {
	case tagBool:
		b, err := d.byte()
		if err != nil {
			return nil, err
		}
		if b > 1 {
			return nil, corrupt("bool %d at byte %d", b, d.off-1)
		}
		return b == 1, nil
	case tagString:
		s, err := d.str()
		return s, err
	case tagBytes:
		n, err := d.optLength(1)
		if err != nil || n < 0 {
			return []byte(nil), err
		}
		if err := d.spend(n + 24); err != nil {
			return nil, err
		}
		return append([]byte{}, d.rawBytes(n)...), nil
	case tagInt, tagInt8, tagInt16, tagInt32, tagInt64:
		x, err := d.varint()
		if err != nil {
			return nil, err
		}
		switch tag {
		case tagInt:
			if int64(int(x)) != x {
				return nil, corrupt("int %d out of range", x)
			}
			return d.boxInt(int(x)), nil
		case tagInt8:
			if x < math.MinInt8 || x > math.MaxInt8 {
				return nil, corrupt("int8 %d out of range", x)
			}
			return int8(x), nil
		case tagInt16:
			if x < math.MinInt16 || x > math.MaxInt16 {
				return nil, corrupt("int16 %d out of range", x)
			}
			return int16(x), nil
		case tagInt32:
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, corrupt("int32 %d out of range", x)
			}
			return int32(x), nil
		}
		return d.boxInt64(x), nil
	case tagUint, tagUint8, tagUint16, tagUint32, tagUint64:
		x, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		switch tag {
		case tagUint:
			if uint64(uint(x)) != x {
				return nil, corrupt("uint %d out of range", x)
			}
			return uint(x), nil
		case tagUint8:
			if x > math.MaxUint8 {
				return nil, corrupt("uint8 %d out of range", x)
			}
			return uint8(x), nil
		case tagUint16:
			if x > math.MaxUint16 {
				return nil, corrupt("uint16 %d out of range", x)
			}
			return uint16(x), nil
		case tagUint32:
			if x > math.MaxUint32 {
				return nil, corrupt("uint32 %d out of range", x)
			}
			return uint32(x), nil
		}
		return x, nil
	case tagFloat32:
		if d.left() < 4 {
			return nil, corrupt("truncated at byte %d", d.off)
		}
		x := binary.LittleEndian.Uint32(d.src[d.off:])
		d.off += 4
		return math.Float32frombits(x), nil
	case tagFloat64:
		x, err := d.fixed64()
		if err != nil {
			return nil, err
		}
		return d.boxFloat64(math.Float64frombits(x)), nil
	case tagTime:
		t, err := d.time()
		if err != nil {
			return nil, err
		}
		return d.boxTime(t), nil
	}
	return nil, corrupt("unknown type tag %#x at byte %d", tag, d.off-1)
}

func (d *decoder) time() (time.Time, error) {
	sec, err := d.varint()
	if err != nil {
		return time.Time{}, err
	}
	nsec, err := d.uvarint()
	if err != nil {
		return time.Time{}, err
	}
	if nsec >= 1e9 {
		return time.Time{}, corrupt("time nanoseconds %d out of range", nsec)
	}
	off, err := d.varint()
	if err != nil {
		return time.Time{}, err
	}
	if off < math.MinInt32 || off > math.MaxInt32 {
		return time.Time{}, corrupt("zone offset %d out of range", off)
	}
	n, err := d.length(1)
	if err != nil {
		return time.Time{}, err
	}
	if n > maxNameLen {
		return time.Time{}, corrupt("location name of %d bytes", n)
	}
	name := d.rawBytes(n)
	return time.Unix(sec, int64(nsec)).In(location(name, int(off))), nil
}

// Locations met in decoding, by name (and by name and offset for the fixed zones made
// when a name does not load). Bounded, so that hostile input cannot grow it forever.
var locs struct {
	sync.Mutex
	loaded map[string]*time.Location
	fixed  map[fixedKey]*time.Location
}

type fixedKey struct {
	name string
	off  int
}

const maxLocs = 1024

// location returns the location named name: time.UTC, time.Local, a loaded zone, or a
// fixed zone with the offset when name does not load.
func location(name []byte, off int) *time.Location {
	switch string(name) {
	case "UTC":
		return time.UTC
	case "Local":
		return time.Local
	case "":
		return time.FixedZone("", off)
	}
	locs.Lock()
	defer locs.Unlock()
	if l, ok := locs.loaded[string(name)]; ok {
		return l
	}
	if l, ok := locs.fixed[fixedKey{string(name), off}]; ok {
		return l
	}
	s := string(name)
	if l, err := time.LoadLocation(s); err == nil {
		if locs.loaded == nil {
			locs.loaded = map[string]*time.Location{}
		}
		if len(locs.loaded) < maxLocs {
			locs.loaded[s] = l
		}
		return l
	}
	l := time.FixedZone(s, off)
	if locs.fixed == nil {
		locs.fixed = map[fixedKey]*time.Location{}
	}
	if len(locs.fixed) < maxLocs {
		locs.fixed[fixedKey{s, off}] = l
	}
	return l
}

func (d *decoder) anySlice(depth int) (any, error) {
	n, err := d.optLength(1)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return []any(nil), nil
	}
	if err := d.spend(16*n + 24); err != nil {
		return nil, err
	}
	out := make([]any, n)
	for i := range out {
		if out[i], err = d.value(depth); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *decoder) anyMap(depth int) (any, error) {
	n, err := d.optLength(2)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return map[string]any(nil), nil
	}
	if err := d.spend(48*n + 64); err != nil {
		return nil, err
	}
	out := make(map[string]any, n)
	prev := ""
	for i := range n {
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if i > 0 && k <= prev {
			return nil, corrupt("map keys out of order at byte %d", d.off)
		}
		prev = k
		if out[k], err = d.value(depth); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *decoder) stringSlice() (any, error) {
	n, err := d.optLength(1)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return []string(nil), nil
	}
	if err := d.spend(16*n + 24); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = d.str(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// numSlice decodes the payload of a []T of a built-in number type without reflection
// per element: a word tuple's two-number []uint64 took 1.4 µs through reflect.
func numSlice[T uint64 | int64 | int | float64](d *decoder, read func() (T, error)) (any, error) {
	n, err := d.optLength(1)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return []T(nil), nil
	}
	var zero T
	if err := d.spend(int(unsafe.Sizeof(zero))*n + 24); err != nil {
		return nil, err
	}
	out := make([]T, n)
	for i := range out {
		if out[i], err = read(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// int reads an int's payload (a varint in int's range).
func (d *decoder) int() (int, error) {
	x, err := d.varint()
	if err == nil && int64(int(x)) != x {
		err = corrupt("int %d out of range", x)
	}
	return int(x), err
}

// float64 reads a float64's payload.
func (d *decoder) float64() (float64, error) {
	x, err := d.fixed64()
	return math.Float64frombits(x), err
}

// typeCache maps descriptors (as strings) to their types.
var typeCache sync.Map

// MaxShapes bounds the slice and map types a process builds from the descriptors it
// receives. Go keeps every type made with reflect.SliceOf and reflect.MapOf for the
// life of the process, so a peer sending values of ever new shapes would grow the
// heap without bound; past this many, a new shape is refused (ErrCorrupt), while the
// shapes already known keep decoding.
const MaxShapes = 4096

// shapes counts the slice and map types built (each composite level of each new
// descriptor).
var shapes atomic.Int64

// desc reads a type descriptor and returns its type: from the cache when the
// descriptor was seen before, else built, within MaxShapes.
func (d *decoder) desc(depth int) (reflect.Type, error) {
	start := d.off
	levels, err := d.skipDesc(depth)
	if err != nil {
		return nil, err
	}
	if levels == 0 { // a scalar, any or registered type: nothing is built
		d.off = start
		return d.descType(depth)
	}
	key := d.src[start:d.off]
	if t, ok := typeCache.Load(string(key)); ok {
		return t.(reflect.Type), nil
	}
	if shapes.Add(int64(levels)) > MaxShapes {
		shapes.Add(-int64(levels))
		return nil, corrupt("a new value shape at byte %d, past the %d slice and map shapes this process builds (a peer sending ever new shapes)", start, MaxShapes)
	}
	end := d.off
	d.off = start
	t, err := d.descType(depth)
	if err != nil {
		return nil, err
	}
	d.off = end
	typeCache.Store(string(key), t)
	return t, nil
}

// skipDesc moves past a type descriptor, checking it, and returns how many slice
// and map levels it has.
func (d *decoder) skipDesc(depth int) (int, error) {
	levels := 0
	for ; ; depth++ {
		if depth >= MaxDepth {
			return 0, corrupt("nested deeper than %d at byte %d", MaxDepth, d.off)
		}
		tag, err := d.byte()
		if err != nil {
			return 0, err
		}
		switch {
		case tag == tagSlice || tag == tagMap:
			levels++
			continue
		case tag == tagUser:
			n, err := d.length(1)
			if err != nil {
				return 0, err
			}
			d.rawBytes(n)
		case tag == tagNil || (tag > tagTime && tag != tagAny):
			return 0, corrupt("type tag %#x at byte %d", tag, d.off-1)
		}
		return levels, nil
	}
}

func (d *decoder) descType(depth int) (reflect.Type, error) {
	if depth >= MaxDepth {
		return nil, corrupt("nested deeper than %d at byte %d", MaxDepth, d.off)
	}
	tag, err := d.byte()
	if err != nil {
		return nil, err
	}
	switch {
	case tag == tagNil:
		return nil, corrupt("nil is not an element type (byte %d)", d.off-1)
	case tag <= tagTime:
		return tagTypes[tag], nil
	case tag == tagAny:
		return typAny, nil
	case tag == tagSlice:
		e, err := d.descType(depth + 1)
		if err != nil {
			return nil, err
		}
		return reflect.SliceOf(e), nil
	case tag == tagMap:
		e, err := d.descType(depth + 1)
		if err != nil {
			return nil, err
		}
		return reflect.MapOf(typString, e), nil
	case tag == tagUser:
		n, err := d.length(1)
		if err != nil {
			return nil, err
		}
		name := d.rawBytes(n)
		ut := registeredName(name)
		if ut == nil {
			return nil, fmt.Errorf("codec: type %q is not registered in this process (codec.Register)", name)
		}
		return ut.typ, nil
	}
	return nil, corrupt("unknown type tag %#x at byte %d", tag, d.off-1)
}

// payload decodes a payload of type t.
func (d *decoder) payload(t reflect.Type, depth int) (reflect.Value, error) {
	if tag, ok := scalarTags[t]; ok {
		v, err := d.scalar(tag)
		if err != nil {
			return reflect.Value{}, err
		}
		return reflect.ValueOf(v), nil
	}
	if ut := registered(t); ut != nil {
		return ut.unmarshal(d)
	}
	if depth >= MaxDepth {
		return reflect.Value{}, corrupt("nested deeper than %d at byte %d", MaxDepth, d.off)
	}
	switch t.Kind() {
	case reflect.Interface:
		v, err := d.value(depth + 1)
		if err != nil {
			return reflect.Value{}, err
		}
		rv := reflect.New(typAny).Elem()
		if v != nil {
			rv.Set(reflect.ValueOf(v))
		}
		return rv, nil
	case reflect.Slice:
		n, err := d.optLength(1)
		if err != nil {
			return reflect.Value{}, err
		}
		if n < 0 {
			return reflect.Zero(t), nil
		}
		if err := d.spend(int(t.Elem().Size())*n + 24); err != nil {
			return reflect.Value{}, err
		}
		out := reflect.MakeSlice(t, n, n)
		for i := range n {
			e, err := d.payload(t.Elem(), depth+1)
			if err != nil {
				return reflect.Value{}, err
			}
			out.Index(i).Set(e)
		}
		return out, nil
	case reflect.Map:
		n, err := d.optLength(2)
		if err != nil {
			return reflect.Value{}, err
		}
		if n < 0 {
			return reflect.Zero(t), nil
		}
		if err := d.spend((int(t.Elem().Size())+32)*n + 64); err != nil {
			return reflect.Value{}, err
		}
		out := reflect.MakeMapWithSize(t, n)
		prev := ""
		for i := range n {
			k, err := d.str()
			if err != nil {
				return reflect.Value{}, err
			}
			if i > 0 && k <= prev {
				return reflect.Value{}, corrupt("map keys out of order at byte %d", d.off)
			}
			prev = k
			e, err := d.payload(t.Elem(), depth+1)
			if err != nil {
				return reflect.Value{}, err
			}
			out.SetMapIndex(reflect.ValueOf(k), e)
		}
		return out, nil
	}
	return reflect.Value{}, corrupt("type %v has no payload", t)
}

// ---- boxing ----

// arena boxes the common scalars of a message's values in shared chunks, so that a
// decoded string costs one allocation (its bytes), not two (bytes and box).
type arena struct {
	strs  []string
	i64s  []int64
	ints  []int
	f64s  []float64
	times []time.Time
	vals  []any
}

const chunk = 128

type eface struct{ typ, data unsafe.Pointer }

func typeWord(x any) unsafe.Pointer { return (*eface)(unsafe.Pointer(&x)).typ }

var (
	typeWordString  = typeWord("")
	typeWordInt64   = typeWord(int64(0))
	typeWordInt     = typeWord(0)
	typeWordFloat64 = typeWord(0.0)
	typeWordTime    = typeWord(time.Time{})
)

// box makes an interface of the given type word holding the value at p (which must
// not change afterwards).
func box(typ, p unsafe.Pointer) (x any) {
	e := (*eface)(unsafe.Pointer(&x))
	e.typ, e.data = typ, p
	return x
}

func next[T any](c *[]T, v T) unsafe.Pointer {
	if len(*c) == cap(*c) {
		*c = make([]T, 0, chunk)
	}
	*c = append(*c, v)
	return unsafe.Pointer(&(*c)[len(*c)-1])
}

func (d *decoder) boxString(s string) any {
	if d.ar == nil {
		return s
	}
	return box(typeWordString, next(&d.ar.strs, s))
}

func (d *decoder) boxInt64(x int64) any {
	if d.ar == nil {
		return x
	}
	return box(typeWordInt64, next(&d.ar.i64s, x))
}

func (d *decoder) boxInt(x int) any {
	if d.ar == nil {
		return x
	}
	return box(typeWordInt, next(&d.ar.ints, x))
}

func (d *decoder) boxFloat64(x float64) any {
	if d.ar == nil {
		return x
	}
	return box(typeWordFloat64, next(&d.ar.f64s, x))
}

func (d *decoder) boxTime(x time.Time) any {
	if d.ar == nil {
		return x
	}
	return box(typeWordTime, next(&d.ar.times, x))
}

// values returns room for n values (a tuple's), from a shared chunk when small.
func (d *decoder) values(n int) tuple.Values {
	if d.ar == nil || n > chunk/4 {
		return make(tuple.Values, n)
	}
	if cap(d.ar.vals)-len(d.ar.vals) < n {
		d.ar.vals = make([]any, 0, chunk)
	}
	l := len(d.ar.vals)
	d.ar.vals = d.ar.vals[:l+n]
	return d.ar.vals[l : l+n : l+n]
}
