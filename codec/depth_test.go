package codec

import (
	"testing"
)

// nestAny wraps inner in k levels of []any.
func nestAny(k int, inner any) any {
	v := inner
	for range k {
		v = []any{v}
	}
	return v
}

// The encoder and the decoder once disagreed by one level on MaxDepth. A scalar
// (or a []string) inside 64 nested []any is encoded by AppendValue, but ReadValue
// refuses the bytes ("nested deeper than 64"): a tuple a bolt emits is accepted on
// emit and lost at every receiving process (each frame an error, the tree times
// out and is replayed for ever). appendValue checked depth only for []any and
// map[string]any values and in makeDesc/appendPayload; the scalar and []string
// cases at depth 64 were written unchecked, while decoder.value refuses depth 64.
func TestEncoderRefusesWhatTheDecoderRefusesAtMaxDepth(t *testing.T) {
	for _, inner := range []any{"word", int64(7), []string{"a"}} {
		v := nestAny(MaxDepth, inner)
		enc, err := AppendValue(nil, v)
		if err != nil {
			continue // refused on both sides: consistent
		}
		if _, _, err := ReadValue(enc); err != nil {
			t.Errorf("%T inside %d []any: AppendValue accepts it, ReadValue refuses it: %v", inner, MaxDepth, err)
		}
	}
}

// Whether a value encoded once depended on what the process encoded before.
// appendDesc answered from descCache before makeDesc checked the depth, so a [][]int16
// at depth 62 (its element type at 64) was refused the first time and accepted once
// a shallow [][]int16 had been encoded; what it then wrote, ReadValue refused.
func TestDepthLimitDoesNotDependOnTheDescriptorCache(t *testing.T) {
	deep := nestAny(MaxDepth-2, [][]int16{{1}})
	_, errFirst := AppendValue(nil, deep)
	if _, err := AppendValue(nil, [][]int16{{2}}); err != nil { // caches the descriptor
		t.Fatal(err)
	}
	enc, errAfter := AppendValue(nil, deep)
	if (errFirst == nil) != (errAfter == nil) {
		t.Errorf("one value, two answers: before caching %v, after %v", errFirst, errAfter)
	}
	if errAfter == nil {
		if _, _, err := ReadValue(enc); err != nil {
			t.Errorf("accepted by AppendValue, refused by ReadValue: %v", err)
		}
	}
}

// Fast path against reflect path: at depth 63 a []uint64 element (numSlice,
// entered from decoder.value with no check that its element descriptor is within
// MaxDepth) decoded, while the same frame with []uint16 (through desc/skipDesc,
// which counts the element type one level deeper) was refused. One input shape,
// two answers depending on the element type.
func TestFastPathSlicesCountTheirElementsDepth(t *testing.T) {
	frame := func(sub byte) []byte {
		var b []byte
		for range MaxDepth - 1 {
			b = append(b, tagSlice, tagAny, 2) // []any of one element
		}
		return append(b, tagSlice, sub, 2, 1) // [] of one element, value 1
	}
	_, _, errFast := ReadValue(frame(tagUint64))
	_, _, errReflect := ReadValue(frame(tagUint16))
	if (errFast == nil) != (errReflect == nil) {
		t.Errorf("at depth %d: []uint64 (fast path) gives %v, []uint16 (reflect path) gives %v", MaxDepth-1, errFast, errReflect)
	}
}
