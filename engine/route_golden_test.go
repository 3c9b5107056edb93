package engine

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// goldenKeys are the keys whose fields-grouping hash is pinned below.
func goldenKeys(t *testing.T) []tuple.Values {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skipf("no Europe/Paris time zone: %v", err)
	}
	return []tuple.Values{
		{""}, {"a"}, {"the"}, {"gale"}, {"héllo wörld"}, {"日本語"}, {"🙂"},
		{0}, {-1}, {42}, {math.MaxInt64}, {math.MinInt64},
		{int8(-128)}, {int16(1000)}, {int32(-70000)}, {int64(42)}, {int64(math.MinInt64)},
		{uint(42)}, {uint8(255)}, {uint16(65535)}, {uint32(1 << 31)}, {uint64(math.MaxUint64)},
		{0.0}, {math.Copysign(0, -1)}, {1.5}, {math.Inf(1)}, {math.NaN()}, {float32(2.25)},
		{true}, {false}, {nil},
		{[]byte{}}, {[]byte("gale")},
		{time.Date(2024, 3, 31, 1, 30, 0, 500, time.UTC)},
		{time.Date(2024, 3, 31, 3, 30, 0, 500, paris)},
		{[]string{"a", "b"}},
		{map[string]any{"id": int64(7), "tags": []string{"x"}, "ok": true}},
		{"a", 1}, {"ab", "c"}, {"a", "bc"},
	}
}

// goldenIdx is the grouping's fields for each key: every value of the key.
func goldenIdx(v tuple.Values) []int {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// TestFieldsGroupingGolden pins the fields hash and the task chosen among 7 for fixed
// keys. The numbers are literals, computed once: if this test fails, a change moved
// keys between tasks, which breaks a topology whose processes run different builds
// (and any state kept per task). Change them only with a codec version that says so.
func TestFieldsGroupingGolden(t *testing.T) {
	want := []struct {
		hash uint64
		task int
	}{
		{0x043e4d8f50f6299b, 1}, // tuple.Values{""}
		{0x7409a2c159d268b0, 3}, // tuple.Values{"a"}
		{0x9ad78a923e9954fc, 1}, // tuple.Values{"the"}
		{0xca2b35350a0379ff, 6}, // tuple.Values{"gale"}
		{0x70936586a1ba9d7e, 2}, // tuple.Values{"héllo wörld"}
		{0xb7ae8f9407b9de9c, 6}, // tuple.Values{"日本語"}
		{0x99000e45f7c08a5b, 6}, // tuple.Values{"🙂"}
		{0x9b82efd42797f01c, 3}, // tuple.Values{0}
		{0xad7735381e85f267, 2}, // tuple.Values{-1}
		{0x8142a24b4d0ee75f, 6}, // tuple.Values{42}
		{0xf93bc1234c03609c, 5}, // tuple.Values{9223372036854775807}
		{0xdae7d57a1e6bd58c, 5}, // tuple.Values{-9223372036854775808}
		{0xbfe577a473e95e30, 1}, // tuple.Values{-128}
		{0xf6bcd5e163c03056, 4}, // tuple.Values{1000}
		{0x1642de85ffd26389, 0}, // tuple.Values{-70000}
		{0xff2c057bab0e4d1b, 0}, // tuple.Values{42}
		{0x6cab80c5da6b3a57, 4}, // tuple.Values{-9223372036854775808}
		{0xe7ff67d1cf4720ef, 4}, // tuple.Values{0x2a}
		{0x2af9b97e362a448a, 5}, // tuple.Values{0xff}
		{0xe0e7ba69a2ec59a4, 0}, // tuple.Values{0xffff}
		{0x286986d9cc42f9bd, 3}, // tuple.Values{0x80000000}
		{0x343f83f4de3ebf0a, 4}, // tuple.Values{0xffffffffffffffff}
		{0xf1d9b9695b070ced, 2}, // tuple.Values{0}
		{0xf1d9b9695b070ced, 2}, // tuple.Values{-0}
		{0x7799463043c8bfac, 5}, // tuple.Values{1.5}
		{0xac33a5bbecb8d421, 5}, // tuple.Values{+Inf}
		{0x2a72d7271a425477, 4}, // tuple.Values{NaN}
		{0xc67f1dfe9616a20c, 5}, // tuple.Values{2.25}
		{0x20cfd980fcca52c4, 4}, // tuple.Values{true}
		{0x61483c17354402a2, 2}, // tuple.Values{false}
		{0x24087fa6bb7ba314, 5}, // tuple.Values{interface {}(nil)}
		{0xa1e01177d9420f4d, 2}, // tuple.Values{[]uint8{}}
		{0x152dfd0574e27512, 1}, // tuple.Values{[]uint8{0x67, 0x61, 0x6c, 0x65}}
		{0x1cd93558f0e3ecc2, 1}, // tuple.Values{time.Date(2024, time.March, 31, 1, 30, 0, 500, time.UTC)}
		{0x9177dace43c09de0, 0}, // tuple.Values{time.Date(2024, time.March, 31, 3, 30, 0, 500, time.Location("Europe/Paris"))}
		{0xc5bdcb8630b5b52c, 3}, // tuple.Values{[]string{"a", "b"}}
		{0xa8be38f2126cedec, 0}, // tuple.Values{map[string]interface {}{"id":7, "ok":true, "tags":[]string{"x"}}}
		{0x2c383b045164cc24, 1}, // tuple.Values{"a", 1}
		{0xf70195b075f2120d, 3}, // tuple.Values{"ab", "c"}
		{0x96ac3f0e506a828c, 2}, // tuple.Values{"a", "bc"}
	}
	keys := goldenKeys(t)
	if len(want) != len(keys) {
		t.Fatalf("%d golden values for %d keys", len(want), len(keys))
	}
	targets := []int{0, 1, 2, 3, 4, 5, 6}
	for i, k := range keys {
		h, err := codec.FieldsHash(k, goldenIdx(k))
		if err != nil {
			t.Fatalf("%#v: %v", k, err)
		}
		r := &route{kind: topology.FieldsKind, targets: targets, fieldIdx: goldenIdx(k)}
		got, err := r.choose(k, nil)
		if err != nil {
			t.Fatalf("%#v: %v", k, err)
		}
		if h != want[i].hash || got[0] != want[i].task {
			t.Errorf("%#v: hash %#016x task %d, pinned %#016x task %d", k, h, got[0], want[i].hash, want[i].task)
		}
	}
}

// Values equal in Go go to one task: -0.0 and 0.0, a time with and without its
// monotonic reading.
func TestFieldsGroupingEqualKeys(t *testing.T) {
	r := &route{kind: topology.FieldsKind, targets: []int{1, 2, 3, 4, 5, 6, 7}, fieldIdx: []int{0}}
	now := time.Now()
	for _, p := range [][2]any{{0.0, math.Copysign(0, -1)}, {now, now.Round(0)}, {now.UTC(), now.Round(0).UTC()}} {
		a, _ := r.choose(tuple.Values{p[0]}, nil)
		b, _ := r.choose(tuple.Values{p[1]}, nil)
		if a[0] != b[0] {
			t.Errorf("%v and %v: tasks %d and %d", p[0], p[1], a[0], b[0])
		}
	}
}

type orderLine struct{ SKU string }

// A key that cannot be encoded fails the emit with an error naming the field and type,
// where the old hash took its address (a pointer) or overflowed the stack (a map that
// holds itself).
func TestFieldsGroupingUnencodable(t *testing.T) {
	self := map[string]any{}
	self["self"] = self
	r := &route{kind: topology.FieldsKind, targets: []int{1, 2}, fieldIdx: []int{1}, fieldNames: []string{"order"}, consumer: "pack"}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{&orderLine{}, `fields grouping to "pack": codec: field "order" (index 1): type *engine.orderLine is not encodable (register it with codec.Register or send built-in types)`},
		{self, "nested deeper than 64"},
	} {
		dst, err := r.choose(tuple.Values{"id", tc.v}, []int{9})
		if !errors.Is(err, codec.ErrUnencodable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want %q", err, tc.want)
		}
		if len(dst) != 1 || dst[0] != 9 {
			t.Errorf("dst %v", dst)
		}
	}
}

// Fields grouping on a word allocates nothing.
func TestFieldsGroupingWordNoAlloc(t *testing.T) {
	r := &route{kind: topology.FieldsKind, targets: []int{1, 2, 3, 4, 5, 6, 7}, fieldIdx: []int{0}}
	vals := tuple.Values{"gale"}
	dst := make([]int, 0, 4)
	if n := testing.AllocsPerRun(100, func() { r.choose(vals, dst[:0]) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func BenchmarkFieldsGroupingWord(b *testing.B) {
	r := &route{kind: topology.FieldsKind, targets: []int{1, 2, 3, 4, 5, 6, 7}, fieldIdx: []int{0}}
	words := []tuple.Values{{"the"}, {"gale"}, {"wind"}, {"storm"}}
	dst := make([]int, 0, 4)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.choose(words[i&3], dst[:0])
		i++
	}
}
