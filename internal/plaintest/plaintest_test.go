package plaintest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type named uint8

func TestPlainValue(t *testing.T) {
	for _, v := range []any{nil, true, "s", []byte("b"), 1, int8(1), int16(1), int32(1), int64(1), uint(1),
		uint8(1), uint16(1), uint32(1), uint64(1), float32(1), float64(1), time.Now(),
		[]any{1, "x", nil, []any{[]byte("y")}}, []string{"a"}, []int64{1},
		map[string]any{"a": 1, "b": map[string]any{"c": []any{time.Time{}}}, "n": nil}, map[string]string{"a": "b"}} {
		if err := PlainValue(v); err != nil {
			t.Errorf("PlainValue(%#v) = %v", v, err)
		}
	}
	x := 1
	for _, tc := range []struct {
		v    any
		want string
	}{
		{&x, "*int is not"},
		{named(1), "plaintest.named is not"},
		{json.RawMessage("{}"), "json.RawMessage is not"},
		{struct{}{}, "struct {} is not"},
		{[]any{1, &x}, "value[1]: *int is not"},
		{map[string]any{"k": []any{named(2)}}, `value["k"][0]: plaintest.named is not`},
		{map[int]any{}, "map keys are not string"},
		{[]named{1}, "value[]: plaintest.named is not"},
	} {
		if err := PlainValue(tc.v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PlainValue(%#v) = %v, want %q", tc.v, err, tc.want)
		}
	}
}
