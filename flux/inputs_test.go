package flux_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// inputsRegistry: a spout of fields (a, b), a bolt that emits its input's fields
// plus the one its property "add" names and records the Spec.Inputs its maker got,
// and a bolt that refuses its property "expr" at the byte its property "at" says
// (SpecError.At), inside the string its property "path" reaches.
func inputsRegistry(t *testing.T, seen map[string][]component.Input) *component.Registry {
	t.Helper()
	reg := &component.Registry{}
	bolt := func(component.Spec) (func() topology.Bolt, error) {
		return func() topology.Bolt { return &nopBolt{} }, nil
	}
	for _, d := range []component.Declaration{
		{Class: "t.Spout", Spout: func(component.Spec) (func() topology.Spout, error) {
			return func() topology.Spout { return &nopSpout{} }, nil
		}, Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"a", "b"}}}, nil
		}},
		{Class: "t.Add", Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			id, _ := s.String("id", "")
			seen[id] = s.Inputs
			return bolt(s)
		}, Outputs: func(s component.Spec) ([]component.Output, error) {
			add, err := s.String("add", "")
			if err != nil || len(s.Inputs) == 0 {
				return nil, fmt.Errorf("add %q, inputs %v: %v", add, s.Inputs, err)
			}
			return []component.Output{{Fields: append(slices.Clone(s.Inputs[0].Fields), add)}}, nil
		}},
		{Class: "t.Refuse", Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			at, _ := s.Int("at", 0)
			path, _ := s.Prop("path")
			p, _ := path.([]any)
			_, _ = s.Prop("expr")
			return nil, &component.SpecError{Arg: -1, Call: -1, Prop: "expr", Path: p, At: at, Msg: "refused"}
		}},
	} {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// A bolt's maker gets the fields of the streams it reads (Spec.Inputs), even when
// it comes before its source in the file; the components are still declared in
// file order (which numbers the tasks).
func TestSpecInputs(t *testing.T) {
	seen := map[string][]component.Input{}
	reg := inputsRegistry(t, seen)
	f, err := flux.Parse("f.yaml", []byte(`name: t
spouts:
  - id: s
    className: t.Spout
bolts:
  - id: second
    className: t.Add
    properties:
      - {name: id, value: second}
      - {name: add, value: d}
  - id: first
    className: t.Add
    properties:
      - {name: id, value: first}
      - {name: add, value: c}
streams:
  - {from: first, to: second, grouping: {type: FIELDS, args: [c]}}
  - {from: s, to: first, grouping: {type: SHUFFLE}}
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Build(reg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]component.Input{
		"first":  {{Component: "s", Stream: tuple.DefaultStream, Fields: []string{"a", "b"}}},
		"second": {{Component: "first", Stream: tuple.DefaultStream, Fields: []string{"a", "b", "c"}}},
	}
	for id, w := range want {
		if g := seen[id]; !slices.EqualFunc(g, w, func(x, y component.Input) bool {
			return x.Component == y.Component && x.Stream == y.Stream && slices.Equal(x.Fields, y.Fields)
		}) {
			t.Errorf("%s's maker got inputs %+v, want %+v", id, g, w)
		}
	}
	var order []string
	for _, c := range b.Topology.Components {
		order = append(order, c.ID)
	}
	if want := []string{"s", "second", "first"}; !slices.Equal(order, want) {
		t.Errorf("components declared in order %v, want the file's %v", order, want)
	}
}

// A SpecError's Path and At point inside a value: at the character, in each
// scalar style, in a list or mapping within the value.
func TestSpecErrorInsideAValue(t *testing.T) {
	reg := inputsRegistry(t, map[string][]component.Input{})
	for _, c := range []struct {
		name, value, path string
		at                int // 1 + the byte offset in the string
		want              string
	}{
		{"plain", "value: abc def", "[]", 5, "f.yaml:10:20: "},                           // 'd'
		{"plain, its end", "value: abc", "[]", 4, "f.yaml:10:19: "},                      // after 'c'
		{"double-quoted", `value: "a\tb def"`, "[]", 5, "f.yaml:10:22: "},                // \t is one byte
		{"single-quoted", `value: 'it''s def'`, "[]", 4, "f.yaml:10:21: "},               // '' is one
		{"literal", "value: |\n          ab\n          cdef", "[]", 5, "f.yaml:12:12: "}, // 'd'
		{"in a list", "value: [x, \"abcdef\"]", "[1]", 5, "f.yaml:10:25: "},
		{"in a mapping in a list", "value: [{k: abcdef}]", "[0, k]", 5, "f.yaml:10:25: "},
		{"a path that leads nowhere", "value: abcdef", "[3]", 5, "f.yaml:10:16: "}, // the value
	} {
		t.Run(c.name, func(t *testing.T) {
			at := c.at
			text := `name: t
spouts:
  - id: s
    className: t.Spout
bolts:
  - id: x
    className: t.Refuse
    properties:
      - name: expr
        ` + c.value + `
      - {name: at, value: ` + fmt.Sprint(at) + `}
      - {name: path, value: ` + c.path + `}
streams:
  - {from: s, to: x, grouping: {type: SHUFFLE}}
`
			f, err := flux.Parse("f.yaml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Build(reg)
			var fe *flux.Error
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %v, want at %q", err, c.want)
			}
		})
	}
}

type nopBolt struct{ topology.BaseBolt }

func (*nopBolt) Execute(*tuple.Tuple) {}

type nopSpout struct{ topology.BaseSpout }

func (*nopSpout) NextTuple() {}
