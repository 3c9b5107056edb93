package codec

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
)

// The encoder's fast paths for []uint64, []int64, []int and []float64 write the bytes
// the reflection path writes (descriptor and payload), at every depth it allows, and
// refuse the depth it refuses.
func TestNumSliceEncodeMatchesReflect(t *testing.T) {
	values := []any{
		[]uint64{0, 1, 127, 128, math.MaxUint64}, []uint64{}, []uint64(nil),
		[]int64{0, -1, 1, math.MinInt64, math.MaxInt64}, []int64{}, []int64(nil),
		[]int{0, -64, 64, math.MinInt, math.MaxInt}, []int{}, []int(nil),
		[]float64{0, math.Copysign(0, -1), 1.5, math.Inf(-1), math.NaN()}, []float64{}, []float64(nil),
	}
	for _, v := range values {
		for _, norm := range []bool{false, true} {
			for _, depth := range []int{0, MaxDepth - 2, MaxDepth - 1} {
				fast, ferr := appendValue([]byte{0xaa}, v, depth, norm)
				rv := reflect.ValueOf(v)
				slow, serr := appendDesc([]byte{0xaa}, rv.Type(), depth)
				if serr == nil {
					slow, serr = appendPayload(slow, rv, depth, norm)
				}
				if (ferr == nil) != (serr == nil) {
					t.Fatalf("%T %v depth %d: fast path error %v, reflection %v", v, v, depth, ferr, serr)
				}
				if ferr != nil {
					if !errors.Is(ferr, ErrUnencodable) {
						t.Fatalf("%T depth %d: %v, want ErrUnencodable", v, depth, ferr)
					}
					continue
				}
				if !bytes.Equal(fast, slow) {
					t.Fatalf("%T %v depth %d norm %v: fast path % x, reflection % x", v, v, depth, norm, fast, slow)
				}
				back, n, err := ReadValue(fast[1:])
				if err != nil || n != len(fast)-1 {
					t.Fatalf("%T %v: read back %v after %d of %d bytes", v, v, err, n, len(fast)-1)
				}
				if reflect.TypeOf(back) != reflect.TypeOf(v) || reflect.ValueOf(back).Len() != rv.Len() || reflect.ValueOf(back).IsNil() != rv.IsNil() {
					t.Fatalf("%T %v: read back %T %v", v, v, back, back)
				}
			}
		}
	}
	// A named slice type is not one of them: it is refused as before (unregistered).
	type ids []uint64
	if _, err := AppendValue(nil, ids{1, 2}); !errors.Is(err, ErrUnencodable) {
		t.Fatalf("named []uint64: %v, want ErrUnencodable", err)
	}
}
