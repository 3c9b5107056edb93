package codec

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// Every frame is bounded in what it allocates, but a type descriptor builds its Go
// type with reflect.SliceOf and reflect.MapOf, and both the reflect package and the
// codec's typeCache keep every such type for the life of the process. Slices
// and maps nest up to MaxDepth (64), so there are 2^63 shapes: a peer (hostile, or
// only varied) that sends values of ever new shapes grows this process's heap
// without bound, a few hundred bytes per frame of 32 bytes, never given back (62 MB
// for these 20,000 frames). Now new shapes past MaxShapes are refused (ErrCorrupt)
// and known ones still decode. Here 20,000 frames of distinct shapes, each a nil
// value of 31 bytes, are decoded and dropped.
func TestBreakDistinctTypeDescriptorsGrowTheHeapForGood(t *testing.T) {
	const frames = 20000
	// The budget is the process's: give it back for the other tests.
	defer func(n int64) { shapes.Store(n) }(shapes.Load())
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
	refused := 0
	for i := range frames {
		_, n, err := ReadValue(frame(i + 1<<20))
		switch {
		case errors.Is(err, ErrCorrupt) && strings.Contains(err.Error(), "shapes"):
			refused++
		case err != nil || n != 32:
			t.Fatalf("frame %d: %v (%d bytes read)", i, err, n)
		}
	}
	// A shape known before the budget ran out still decodes.
	if _, n, err := ReadValue(frame(1 << 20)); err != nil || n != 32 {
		t.Fatalf("a known shape after the budget ran out: %v (%d bytes read)", err, n)
	}
	if refused == 0 {
		t.Fatalf("all %d new shapes were built: no bound", frames)
	}
	after, cachedAfter := heap(), cached()
	grown := int64(after) - int64(before)
	t.Logf("heap grew %d bytes (%d per frame) over %d frames of 32 bytes, %d new shapes refused; typeCache %d -> %d entries", grown, grown/frames, frames, refused, cachedBefore, cachedAfter)
	if grown > 8<<20 || cachedAfter-cachedBefore > MaxShapes {
		t.Fatalf("decoding %d frames of 32 bytes, then dropping them, left the heap %d bytes larger (%d per frame) and typeCache %d entries larger: memory grows with the number of distinct shapes received, without bound",
			frames, grown, grown/frames, cachedAfter-cachedBefore)
	}
}
