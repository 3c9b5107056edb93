package codec

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/tuple"
)

// fnvOver is the reference: FNV-1a over AppendValue's bytes, -0.0 written as +0.0.
func fnvOver(t testing.TB, v any) uint64 {
	b, err := appendValue(nil, v, 0, true)
	if err != nil {
		t.Fatalf("%T: %v", v, err)
	}
	f := fnv.New64a()
	f.Write(b)
	return f.Sum64()
}

// The fast paths of HashValue fold exactly the bytes of the encoding.
func TestHashIsFNVOfEncoding(t *testing.T) {
	vals := builtinSamples(t)
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		x := r.Uint64() >> (r.IntN(64))
		vals = append(vals, int(x), -int(x), int64(x), -int64(x), int32(x), int16(x), int8(x),
			uint(x), x, uint32(x), uint16(x), uint8(x), math.Float64frombits(r.Uint64()),
			math.Float32frombits(r.Uint32()), r.IntN(2) == 0,
			strings.Repeat("é", r.IntN(100)), make([]byte, r.IntN(200)),
			time.Unix(int64(x), int64(r.IntN(1e9))).UTC())
	}
	for _, v := range vals {
		got, err := HashValue(FNVOffset, v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if want := fnvOver(t, v); got != want {
			t.Fatalf("%T %#v: HashValue %#x, FNV-1a of the encoding %#x", v, v, got, want)
		}
	}
}

// -0.0 and 0.0 are one key (also inside composites); the monotonic reading does not
// matter; a time in another location is another key.
func TestHashEqualKeys(t *testing.T) {
	neg := math.Copysign(0, -1)
	pairs := [][2]any{
		{0.0, neg},
		{float32(0), float32(neg)},
		{[]float64{0}, []float64{neg}},
		{[]any{0.0}, []any{neg}},
		{map[string]any{"a": 0.0}, map[string]any{"a": neg}},
		{map[string]any{"a": 1, "b": 2}, map[string]any{"b": 2, "a": 1}},
	}
	now := time.Now()
	pairs = append(pairs, [2]any{now, now.Round(0)})
	for _, p := range pairs {
		a, _ := HashValue(FNVOffset, p[0])
		b, _ := HashValue(FNVOffset, p[1])
		if a != b {
			t.Errorf("%#v and %#v hash differently", p[0], p[1])
		}
	}
	a, _ := HashValue(FNVOffset, now.UTC())
	b, _ := HashValue(FNVOffset, now.In(time.FixedZone("X", 3600)))
	if a == b {
		t.Error("one instant in two locations: one hash")
	}
	// The encoding itself keeps -0.0.
	enc, _ := AppendValue(nil, neg)
	if v, _, _ := ReadValue(enc); !math.Signbit(v.(float64)) {
		t.Error("-0.0 lost its sign in the encoding")
	}
}

func TestFieldsHashSeparatesFields(t *testing.T) {
	a, _ := FieldsHash(tuple.Values{"ab", "c"}, []int{0, 1})
	b, _ := FieldsHash(tuple.Values{"a", "bc"}, []int{0, 1})
	c, _ := FieldsHash(tuple.Values{1, 1}, []int{0, 1})
	d, _ := FieldsHash(tuple.Values{1, int64(1)}, []int{0, 1})
	if a == b || c == d {
		t.Fatal("collision")
	}
	_, err := FieldsHash(tuple.Values{"x", func() {}}, []int{1})
	if err == nil || !strings.Contains(err.Error(), "value 1: type func() is not encodable") {
		t.Fatalf("%v", err)
	}
}

func TestHashWordDoesNotAllocate(t *testing.T) {
	vals := tuple.Values{"word", 42, 1.5, int64(7)}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := FieldsHash(vals, []int{0, 1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func BenchmarkFieldsHashWord(b *testing.B) {
	vals := tuple.Values{"gale"}
	idx := []int{0}
	b.ReportAllocs()
	for b.Loop() {
		FieldsHash(vals, idx)
	}
}
