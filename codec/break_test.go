package codec

import (
	"runtime"
	"testing"
)

// BUG: every frame is bounded in what it allocates, but a type descriptor builds
// its Go type with reflect.SliceOf and reflect.MapOf, and both the reflect package
// and the codec's typeCache keep every such type for the life of the process. Slices
// and maps nest up to MaxDepth (64), so there are 2^63 shapes: a peer (hostile, or
// only varied) that sends values of ever new shapes grows this process's heap
// without bound, a few hundred bytes per frame of 32 bytes, never given back. Here
// 20,000 frames of distinct shapes, each a nil value of 31 bytes, are decoded and
// dropped.
func TestBreakDistinctTypeDescriptorsGrowTheHeapForGood(t *testing.T) {
	const frames = 20000
	frame := func(i int) []byte {
		b := make([]byte, 0, 32)
		for bit := range 30 {
			if i>>bit&1 == 1 {
				b = append(b, tagMap)
			} else {
				b = append(b, tagSlice)
			}
		}
		// A scalar element type, then the payload: a nil slice or map.
		return append(b, tagInt, 0)
	}
	// (Only 0x11 and 0x12 lead: never the []any, map[string]any or []string fast
	// paths, so every frame goes through the descriptor.)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	cached := func() int {
		n := 0
		typeCache.Range(func(any, any) bool { n++; return true })
		return n
	}
	before, cachedBefore := heap(), cached()
	for i := range frames {
		v, n, err := ReadValue(frame(i + 1<<20))
		if err != nil || n != 32 {
			t.Fatalf("frame %d: %v (%d bytes read)", i, err, n)
		}
		_ = v
	}
	after, cachedAfter := heap(), cached()
	grown := int64(after) - int64(before)
	t.Logf("heap grew %d bytes (%d per frame) over %d frames of 32 bytes; typeCache %d -> %d entries", grown, grown/frames, frames, cachedBefore, cachedAfter)
	if grown > 8<<20 || cachedAfter-cachedBefore > 1000 {
		t.Fatalf("decoding %d frames of 32 bytes, then dropping them, left the heap %d bytes larger (%d per frame) and typeCache %d entries larger: memory grows with the number of distinct shapes received, without bound",
			frames, grown, grown/frames, cachedAfter-cachedBefore)
	}
}
