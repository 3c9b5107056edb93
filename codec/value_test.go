package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/tuple"
)

// point is a registered value type (its pointer has the methods).
type point struct{ X, Y int32 }

func (p *point) MarshalBinary() ([]byte, error) {
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, uint32(p.X)), uint32(p.Y)), nil
}

func (p *point) UnmarshalBinary(b []byte) error {
	if len(b) != 8 {
		return fmt.Errorf("point: %d bytes", len(b))
	}
	p.X, p.Y = int32(binary.LittleEndian.Uint32(b)), int32(binary.LittleEndian.Uint32(b[4:]))
	return nil
}

// label is a registered pointer type.
type label struct{ S string }

func (l *label) MarshalBinary() ([]byte, error) { return []byte(l.S), nil }
func (l *label) UnmarshalBinary(b []byte) error { l.S = string(b); return nil }

// orderLine is never registered.
type orderLine struct{ SKU string }

type word string

func init() {
	if err := Register("codec_test.point", point{}); err != nil {
		panic(err)
	}
	if err := Register("codec_test.label", &label{}); err != nil {
		panic(err)
	}
}

func mustLoc(t testing.TB, name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no time zone %s: %v", name, err)
	}
	return l
}

// builtinSamples is one or more values of every built-in type, and composites of them.
func builtinSamples(t testing.TB) []any {
	paris := mustLoc(t, "Europe/Paris")
	return []any{
		nil, true, false,
		"", "word", "héllo wörld ✓", strings.Repeat("x", 300),
		[]byte(nil), []byte{}, []byte{0, 1, 255},
		0, 1, -1, math.MaxInt, math.MinInt,
		int8(0), int8(math.MinInt8), int8(math.MaxInt8),
		int16(math.MinInt16), int16(math.MaxInt16),
		int32(math.MinInt32), int32(math.MaxInt32),
		int64(0), int64(math.MinInt64), int64(math.MaxInt64), int64(-300),
		uint(0), uint(math.MaxUint),
		uint8(0), uint8(255),
		uint16(math.MaxUint16), uint32(math.MaxUint32), uint64(math.MaxUint64), uint64(128),
		float32(0), float32(-1.5), float32(math.Inf(1)), float32(math.NaN()), float32(math.Copysign(0, -1)),
		0.0, math.Copysign(0, -1), math.Pi, math.Inf(-1), math.NaN(), math.Float64frombits(0x7ff8000000000bad),
		math.SmallestNonzeroFloat64, math.MaxFloat64,
		time.Time{},
		time.Date(2024, 3, 31, 1, 59, 59, 999999999, time.UTC),
		time.Date(2024, 3, 31, 3, 0, 0, 1, paris),
		time.Date(1850, 1, 1, 0, 0, 0, 0, paris),
		time.Date(2024, 7, 1, 12, 0, 0, 0, time.Local),
		time.Date(2024, 7, 1, 12, 0, 0, 0, time.FixedZone("X+1", 3600)),
		time.Date(2024, 7, 1, 12, 0, 0, 0, time.FixedZone("", -7200)),
		[]any(nil), []any{}, []any{nil, 1, "a", []any{int8(2), map[string]any{"k": []string{"x"}}}},
		[]string(nil), []string{}, []string{"a", "", "ü"},
		[]int64{1, -1, math.MaxInt64}, []int{3, 2, 1}, []uint8{1, 2}, []float64{math.Copysign(0, -1), 1},
		[]uint64(nil), []uint64{}, []uint64{0, 300, math.MaxUint64}, []int64(nil), []int{}, []int{math.MinInt},
		[]float64(nil), []float64{}, [][]uint64{{1, 2}, nil}, map[string][]int64{"k": {-5}},
		[]bool{true, false}, []time.Time{time.Unix(0, 0).UTC(), time.Date(2000, 1, 1, 0, 0, 0, 0, paris)},
		map[string]any(nil), map[string]any{}, map[string]any{"b": 2, "a": "x", "": nil, "n": map[string]any{"z": []byte("q")}},
		map[string]int{"one": 1, "two": 2}, map[string]int(nil),
		[][]byte{nil, {}, {1}}, map[string][]string{"k": {"v", "w"}, "e": nil},
		[][]any{{1}, nil}, map[string]map[string]float32{"a": {"b": 1.5}},
		point{X: -3, Y: 4}, &label{S: "hi"}, (*label)(nil),
		[]point{{1, 2}, {3, 4}}, map[string]*label{"a": {S: "x"}, "b": nil},
		[]any{point{5, 6}, &label{S: "in any"}},
	}
}

func hasNaN(b []byte, v any) bool {
	s := fmt.Sprint(v)
	return strings.Contains(s, "NaN")
}

// TestRoundTrip: every built-in type decodes to the same type and value; NaNs are
// compared by their bits (re-encoding gives the same bytes).
func TestRoundTrip(t *testing.T) {
	for _, v := range builtinSamples(t) {
		enc, err := AppendValue([]byte{0xAA}, v)
		if err != nil {
			t.Fatalf("%T %#v: %v", v, v, err)
		}
		enc = enc[1:]
		got, n, err := ReadValue(enc)
		if err != nil {
			t.Fatalf("%T %#v: decode: %v", v, v, err)
		}
		if n != len(enc) {
			t.Fatalf("%T %#v: read %d of %d bytes", v, v, n, len(enc))
		}
		if reflect.TypeOf(got) != reflect.TypeOf(v) {
			t.Fatalf("%T %#v decoded as %T", v, v, got)
		}
		again, err := AppendValue(nil, got)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("%T %#v: re-encoded %x, first %x (%v)", v, v, again, enc, err)
		}
		if !hasNaN(enc, v) && !reflect.DeepEqual(got, v) {
			t.Fatalf("%T: got %#v, want %#v", v, got, v)
		}
		if tv, ok := v.(time.Time); ok && (!tv.Equal(got.(time.Time)) || tv.Location().String() != got.(time.Time).Location().String()) {
			t.Fatalf("time %v decoded as %v", tv, got)
		}
	}
}

// A time's monotonic reading is dropped; its instant and location are kept.
func TestTimeMonotonicDropped(t *testing.T) {
	now := time.Now()
	enc, _ := AppendValue(nil, now)
	got, _, err := ReadValue(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got != now.Round(0) || got.(time.Time).Location() != time.Local {
		t.Fatalf("got %v, want %v", got, now.Round(0))
	}
	enc2, _ := AppendValue(nil, now.Round(0))
	if !bytes.Equal(enc, enc2) {
		t.Fatal("the monotonic reading changed the encoding")
	}
}

// An unknown zone name decodes as a fixed zone with the sent offset.
func TestTimeUnknownZone(t *testing.T) {
	tm := time.Date(2024, 1, 1, 0, 0, 0, 0, time.FixedZone("Mars/Olympus", 5400))
	enc, _ := AppendValue(nil, tm)
	got, _, err := ReadValue(enc)
	if err != nil {
		t.Fatal(err)
	}
	gt := got.(time.Time)
	name, off := gt.Zone()
	if !gt.Equal(tm) || gt.Location().String() != "Mars/Olympus" || off != 5400 || name != "Mars/Olympus" {
		t.Fatalf("got %v", gt)
	}
}

func TestUnencodable(t *testing.T) {
	self := map[string]any{}
	self["me"] = self
	loop := []any{nil}
	loop[0] = loop
	for _, tc := range []struct {
		v    any
		want string
	}{
		{func() {}, "type func() is not encodable"},
		{make(chan int), "type chan int is not encodable"},
		{orderLine{}, "type codec.orderLine is not encodable (register it with codec.Register or send built-in types)"},
		{&orderLine{}, "type *codec.orderLine is not encodable (register it"},
		{&point{}, "type *codec.point is not encodable"}, // point is registered as a value
		{word("w"), "type codec.word is not encodable"},
		{map[int]string{1: "a"}, "type map[int]string is not encodable (maps must have string keys)"},
		{[]func(){nil}, "type func() (in []func()) is not encodable"},
		{map[string]any{"a": []any{1, orderLine{}}}, `at ["a"][1]: type codec.orderLine is not encodable`},
		{self, "nested deeper than 64"},
		{loop, "nested deeper than 64"},
		{new(int), "type *int is not encodable"},
	} {
		b, err := AppendValue([]byte("keep"), tc.v)
		if !errors.Is(err, ErrUnencodable) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%T: err %v, want one containing %q", tc.v, err, tc.want)
		}
		if string(b) != "keep" {
			t.Errorf("%T: dst changed to %q", tc.v, b)
		}
		if _, err := HashValue(FNVOffset, tc.v); !errors.Is(err, ErrUnencodable) {
			t.Errorf("%T: hash err %v", tc.v, err)
		}
	}
	_, err := AppendValues(nil, tuple.Values{"id", &orderLine{}}, tuple.NewFields("id", "order"))
	want := `codec: field "order" (index 1): type *codec.orderLine is not encodable (register it with codec.Register or send built-in types)`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
	var ue *UnencodableError
	if !errors.As(err, &ue) || ue.Field != "order" || ue.Index != 1 {
		t.Fatalf("%#v", ue)
	}
}

type failing struct{}

func (*failing) MarshalBinary() ([]byte, error) { return nil, errors.New("boom") }
func (*failing) UnmarshalBinary([]byte) error   { return errors.New("bang") }

type noMethods struct{}

func TestRegister(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sample any
		want   string
	}{
		{"codec_test.point", &label{}, "the name is taken"},
		{"codec_test.other", point{}, `is registered as "codec_test.point"`},
		{"", point{}, "a name must have"},
		{"x", nil, "nil sample"},
		{"x", "s", "string is built in"},
		{"x", noMethods{}, "does not implement"},
	} {
		err := Register(tc.name, tc.sample)
		if !errors.Is(err, ErrRegister) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%q, %T) = %v, want %q", tc.name, tc.sample, err, tc.want)
		}
	}
	if err := Register("codec_test.failing", &failing{}); err != nil {
		t.Fatal(err)
	}
	_, err := AppendValue(nil, &failing{})
	if !errors.Is(err, ErrUnencodable) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("marshal error: %v", err)
	}
	enc := []byte{tagUser}
	enc = appendString(enc, "codec_test.failing")
	enc = append(enc, 1)
	if _, _, err := ReadValue(enc); err == nil || !strings.Contains(err.Error(), "bang") {
		t.Fatalf("unmarshal error: %v", err)
	}
	enc = appendString([]byte{tagUser}, "nobody")
	if _, _, err := ReadValue(append(enc, 1)); err == nil || !strings.Contains(err.Error(), `"nobody" is not registered`) {
		t.Fatalf("unknown name: %v", err)
	}
}

// Hostile inputs fail cleanly.
func TestReadValueCorrupt(t *testing.T) {
	huge := binary.AppendUvarint(nil, 1<<62)
	for _, in := range [][]byte{
		{},
		{0x7f},
		{tagString},
		append([]byte{tagString}, huge...),
		append([]byte{tagSlice, tagAny}, huge...),
		append([]byte{tagMap, tagAny}, huge...),
		append([]byte{tagSlice, tagInt64}, huge...),
		append([]byte{tagBytes}, huge...),
		{tagBool, 2},
		{tagInt8, 0x80, 0x02},
		{tagFloat64, 1, 2},
		{tagSlice, tagNil, 2},
		bytes.Repeat([]byte{tagSlice}, 100),
		append(bytes.Repeat([]byte{tagSlice, tagAny, 2}, 100), tagNil),
		{tagMap, tagAny, 3, 1, 'b', tagNil, 1, 'a', tagNil}, // keys out of order
		{tagTime, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0},    // nanoseconds out of range
		{tagUser, 1, 'x', 1},                                // unknown name
		append([]byte{tagTime, 0, 0, 0}, appendString(nil, strings.Repeat("z", 300))...), // long zone name
	} {
		if v, _, err := ReadValue(in); err == nil {
			t.Errorf("%x decoded as %#v", in, v)
		}
	}
}
