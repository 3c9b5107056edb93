package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"runtime"
	"testing"
)

// The []uint64, []int64, []int and []float64 fast paths of decoder.value (numSlice)
// against hostile, truncated and extreme input. These tests pin what held when
// they were attacked: no panic, no allocation past the budget, exact round trips,
// and the same values as the reflect path gives the same payload.

// numSamples are values of the four fast-path types at their extremes.
func numSamples() []any {
	negZero := math.Copysign(0, -1)
	nanPayload := math.Float64frombits(0x7ff8_0000_dead_beef)
	return []any{
		[]uint64{0, 1, 127, 128, math.MaxUint32, math.MaxUint64},
		[]int64{0, -1, 1, math.MinInt64, math.MaxInt64, -64, 63, -65, 64},
		[]int{0, -1, math.MinInt, math.MaxInt},
		[]float64{0, negZero, math.Inf(1), math.Inf(-1), nanPayload, math.SmallestNonzeroFloat64, math.MaxFloat64},
		[]uint64{}, []int64{}, []int{}, []float64{},
		[]uint64(nil), []int64(nil), []int(nil), []float64(nil),
	}
}

// Every prefix of an encoding, and every single-byte corruption of it, decodes to
// an error or to a value without panicking; a proper prefix never decodes whole.
func TestNumSliceTruncatedAndCorruptInputHeld(t *testing.T) {
	for _, v := range numSamples() {
		enc, err := AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(enc) {
			if got, _, err := ReadValue(enc[:n]); err == nil {
				t.Errorf("%T: the first %d of %d bytes decoded to %#v", v, n, len(enc), got)
			} else if !errors.Is(err, ErrCorrupt) {
				t.Errorf("%T: the first %d bytes: error %v does not match ErrCorrupt", v, n, err)
			}
		}
		for i := range enc {
			for _, b := range []byte{0x00, 0x01, 0x7f, 0x80, 0xff} {
				bad := bytes.Clone(enc)
				bad[i] = b
				_, _, _ = ReadValue(bad) // must not panic
			}
		}
	}
}

// A count far beyond the bytes left is refused before anything is allocated; a
// count the bytes allow is charged to the budget before make.
func TestNumSliceHostileCountsHeld(t *testing.T) {
	for _, sub := range []byte{tagUint64, tagInt64, tagInt, tagFloat64} {
		for _, count := range []uint64{1 << 62, math.MaxUint64, 1 << 31, 1000} {
			frame := binary.AppendUvarint([]byte{tagSlice, sub}, count)
			frame = append(frame, make([]byte, 16)...)
			if v, _, err := ReadValue(frame); err == nil || !errors.Is(err, ErrCorrupt) {
				t.Errorf("tag %#x count %d over 16 bytes: got %#v, %v", sub, count, v, err)
			}
		}
	}
	// The largest count the bytes allow for []float64: one byte each, so the
	// payload is an eighth of what the count claims. It fails on truncation, and
	// what it allocated stays within 64 bytes per input byte plus the slack.
	const n = 1 << 20
	frame := binary.AppendUvarint([]byte{tagSlice, tagFloat64}, n+1)
	frame = append(frame, make([]byte, n)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := ReadValue(frame)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a []float64 of 2^20 elements in 2^20 bytes decoded")
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(budgetFor(len(frame))) {
		t.Fatalf("decoding %d bytes allocated %d, over the budget %d", len(frame), alloc, budgetFor(len(frame)))
	}
}

// Round trips are exact: types, nil against empty, and float bits (NaN payloads,
// -0.0), whole and inside []any and map[string]any.
func TestNumSliceRoundTripExactHeld(t *testing.T) {
	for _, v := range numSamples() {
		for _, wrapped := range []any{v, []any{v, "x", v}, map[string]any{"a": v, "b": []any{v}}} {
			enc, err := AppendValue(nil, wrapped)
			if err != nil {
				t.Fatal(err)
			}
			got, n, err := ReadValue(enc)
			if err != nil || n != len(enc) {
				t.Fatalf("%#v: read %d of %d: %v", wrapped, n, len(enc), err)
			}
			again, err := AppendValue(nil, got)
			if err != nil || !bytes.Equal(again, enc) {
				t.Fatalf("%#v decoded to %#v, which encodes to %x, not %x", wrapped, got, again, enc)
			}
			if reflect.TypeOf(got) != reflect.TypeOf(wrapped) {
				t.Fatalf("%T decoded as %T", wrapped, got)
			}
		}
	}
}

// The fast path and the reflect path decode one payload to the same elements: a
// []T decoded whole (fast path) equals the same []T decoded as the value of a
// map[string][]T or as an element of a [][]T (both through reflect).
func TestNumSliceAgreesWithReflectPathHeld(t *testing.T) {
	for _, v := range numSamples() {
		fast, err := AppendValue(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := ReadValue(fast)
		if err != nil {
			t.Fatal(err)
		}
		outer := reflect.MakeSlice(reflect.SliceOf(reflect.TypeOf(v)), 1, 1)
		outer.Index(0).Set(reflect.ValueOf(v))
		m := reflect.MakeMap(reflect.MapOf(typString, reflect.TypeOf(v)))
		m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf(v))
		for _, nested := range []reflect.Value{outer, m} {
			enc, err := AppendValue(nil, nested.Interface())
			if err != nil {
				t.Fatal(err)
			}
			back, _, err := ReadValue(enc)
			if err != nil {
				t.Fatalf("%T: %v", nested.Interface(), err)
			}
			rv := reflect.ValueOf(back)
			var elem reflect.Value
			if rv.Kind() == reflect.Map {
				elem = rv.MapIndex(reflect.ValueOf("k"))
			} else {
				elem = rv.Index(0)
			}
			a, _ := AppendValue(nil, got)
			b, _ := AppendValue(nil, elem.Interface())
			if !bytes.Equal(a, b) || (reflect.ValueOf(got).IsNil() != elem.IsNil()) {
				t.Fatalf("%T: fast path %#v, reflect path %#v", v, got, elem.Interface())
			}
		}
	}
}
