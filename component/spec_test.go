package component_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gale-stream/gale/component"
)

// TestSpecValues: each method on values a decoder gives, good and bad; a bad one's
// error names the position or key, the type wanted and the value got.
func TestSpecValues(t *testing.T) {
	s := component.Spec{
		Args: []any{"kafka:9092", 3, 2.0, 2.5, true, []any{"a", "b"}, []any{"a", 7}, nil, "3", int64(math.MaxInt64), uint64(math.MaxUint64), 1e300, []string{"x"}},
		Properties: map[string]any{
			"topic": "orders", "batch": 500, "ratio": 1, "half": 0.5, "async": false, "fields": []any{"id", "body"},
			"every": "250ms", "quoted": "500", "yes": "yes", "port": 8080, "null": nil, "bare": 5, "map": map[string]any{"a": 1},
		},
	}
	for _, tc := range []struct {
		name string
		call func() (any, error)
		want any    // when err is ""
		err  string // the whole error
	}{
		{"ArgString", func() (any, error) { return s.ArgString(0) }, "kafka:9092", ""},
		{"ArgInt", func() (any, error) { return s.ArgInt(1) }, 3, ""},
		{"ArgInt of an integral float", func() (any, error) { return s.ArgInt(2) }, 2, ""},
		{"ArgInt of int64", func() (any, error) { return s.ArgInt(9) }, math.MaxInt, ""},
		{"ArgFloat", func() (any, error) { return s.ArgFloat(3) }, 2.5, ""},
		{"ArgFloat of an int", func() (any, error) { return s.ArgFloat(1) }, 3.0, ""},
		{"ArgBool", func() (any, error) { return s.ArgBool(4) }, true, ""},
		{"ArgStrings", func() (any, error) { return s.ArgStrings(5) }, []string{"a", "b"}, ""},
		{"ArgStrings of []string", func() (any, error) { return s.ArgStrings(12) }, []string{"x"}, ""},
		{"Arg raw", func() (any, error) { return s.Arg(7) }, nil, ""},
		{"ArgInt of a fraction", func() (any, error) { return s.ArgInt(3) }, nil,
			`invalid spec: constructorArgs[3]: want an integer, got number 2.5`},
		{"ArgInt of a string", func() (any, error) { return s.ArgInt(8) }, nil,
			`invalid spec: constructorArgs[8]: want an integer, got string "3"`},
		{"ArgInt of a huge uint64", func() (any, error) { return s.ArgInt(10) }, nil,
			`invalid spec: constructorArgs[10]: want an integer, got integer 18446744073709551615`},
		{"ArgInt of a huge float", func() (any, error) { return s.ArgInt(11) }, nil,
			`invalid spec: constructorArgs[11]: want an integer, got number 1e+300`},
		{"ArgFloat of a string", func() (any, error) { return s.ArgFloat(8) }, nil,
			`invalid spec: constructorArgs[8]: want a number, got string "3"`},
		{"ArgString of an int", func() (any, error) { return s.ArgString(1) }, nil,
			`invalid spec: constructorArgs[1]: want a string, got integer 3`},
		{"ArgString of null", func() (any, error) { return s.ArgString(7) }, nil,
			`invalid spec: constructorArgs[7]: want a string, got null`},
		{"ArgBool of a string", func() (any, error) { return s.ArgBool(0) }, nil,
			`invalid spec: constructorArgs[0]: want true or false, got string "kafka:9092"`},
		{"ArgStrings with an int", func() (any, error) { return s.ArgStrings(6) }, nil,
			`invalid spec: constructorArgs[6]: want a list of strings, got a list whose element 1 is integer 7`},
		{"ArgStrings of a string", func() (any, error) { return s.ArgStrings(0) }, nil,
			`invalid spec: constructorArgs[0]: want a list of strings, got string "kafka:9092"`},
		{"Arg past the end", func() (any, error) { return s.ArgString(13) }, nil,
			`invalid spec: constructorArgs[13] is missing: the class takes at least 14, the file gives 13`},
		{"Arg at a negative position", func() (any, error) { return s.Arg(-1) }, nil,
			`invalid spec: constructorArgs[-1]: a negative position (the class's code is wrong)`},

		{"String", func() (any, error) { return s.String("topic", "x") }, "orders", ""},
		{"String default", func() (any, error) { return s.String("group", "gale") }, "gale", ""},
		{"Int", func() (any, error) { return s.Int("batch", 1) }, 500, ""},
		{"Int default", func() (any, error) { return s.Int("size", 7) }, 7, ""},
		{"Float of an int", func() (any, error) { return s.Float("ratio", 0) }, 1.0, ""},
		{"Float", func() (any, error) { return s.Float("half", 0) }, 0.5, ""},
		{"Bool", func() (any, error) { return s.Bool("async", true) }, false, ""},
		{"Strings", func() (any, error) { return s.Strings("fields", nil) }, []string{"id", "body"}, ""},
		{"Strings default", func() (any, error) { return s.Strings("keys", []string{"k"}) }, []string{"k"}, ""},
		{"Duration", func() (any, error) { return s.Duration("every", time.Second) }, 250 * time.Millisecond, ""},
		{"Duration default", func() (any, error) { return s.Duration("timeout", time.Second) }, time.Second, ""},
		{"Int of a quoted number", func() (any, error) { return s.Int("quoted", 1) }, nil,
			`invalid spec: property "quoted": want an integer, got string "500"`},
		{"Bool of yes", func() (any, error) { return s.Bool("yes", false) }, nil,
			`invalid spec: property "yes": want true or false, got string "yes"`},
		{"String of a number", func() (any, error) { return s.String("port", "") }, nil,
			`invalid spec: property "port": want a string, got integer 8080`},
		{"String of null", func() (any, error) { return s.String("null", "d") }, nil,
			`invalid spec: property "null": want a string, got null`},
		{"Duration of a bare number", func() (any, error) { return s.Duration("bare", 0) }, nil,
			`invalid spec: property "bare": want a duration such as "500ms" or "2m", got integer 5`},
		{"Duration of a bad string", func() (any, error) { return s.Duration("yes", 0) }, nil,
			`invalid spec: property "yes": want a duration such as "500ms" or "2m", got string "yes"`},
		{"Strings of a map", func() (any, error) { return s.Strings("map", nil) }, nil,
			`invalid spec: property "map": want a list of strings, got a map of 1`},
	} {
		got, err := tc.call()
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", tc.want, tc.want):
			t.Errorf("%s: %T %v, want %T %v", tc.name, got, got, tc.want, tc.want)
		case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, component.ErrSpec)):
			t.Errorf("%s: %v\nwant: %s (wrapping ErrSpec)", tc.name, err, tc.err)
		}
	}
}

// TestSpecFromYAML: the types a YAML decoder gives are the ones the methods take.
func TestSpecFromYAML(t *testing.T) {
	var c struct {
		Args  []any          `yaml:"constructorArgs"`
		Props map[string]any `yaml:"properties"`
	}
	err := yaml.Unmarshal([]byte(`
constructorArgs: ["node", 3, 5.0, 0.25, true, ["node", "split.js"]]
properties: {flush: 2s, batch: 1e3, name: "007", on: yes}
`), &c)
	if err != nil {
		t.Fatal(err)
	}
	s := component.Spec{Args: c.Args, Properties: c.Props}
	str, err0 := s.ArgString(0)
	i, err1 := s.ArgInt(1)
	f, err2 := s.ArgInt(2) // 5.0 is an integer
	q, err3 := s.ArgFloat(3)
	b, err4 := s.ArgBool(4)
	cmd, err5 := s.ArgStrings(5)
	flush, err6 := s.Duration("flush", 0)
	batch, err7 := s.Int("batch", 0) // YAML's 1e3 is a float64
	name, err8 := s.String("name", "")
	if err := errors.Join(err0, err1, err2, err3, err4, err5, err6, err7, err8); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%v %v %v %v %v %v %v %v %v", str, i, f, q, b, cmd, flush, batch, name)
	if want := "node 3 5 0.25 true [node split.js] 2s 1000 007"; got != want {
		t.Errorf("read %q, want %q", got, want)
	}
	// YAML 1.2 (yaml.v3) reads yes as a string, not YAML 1.1's true.
	if _, err := s.Bool("on", false); err == nil || err.Error() != `invalid spec: property "on": want true or false, got string "yes"` {
		t.Errorf(`Bool("on") of yes: %v`, err)
	}
}

func TestSpecRequire(t *testing.T) {
	s := component.Spec{Properties: map[string]any{"topic": "orders", "empty": nil}}
	for keys, want := range map[string]string{
		"topic":               "",
		"empty":               "", // given, as null: its reader says what is wrong with it
		"topic group":         `invalid spec: property "group" is required`,
		"brokers topic group": `invalid spec: properties "brokers", "group" are required`,
	} {
		err := s.Require(strings.Fields(keys)...)
		if (want == "" && err != nil) || (want != "" && (err == nil || err.Error() != want || !errors.Is(err, component.ErrSpec))) {
			t.Errorf("Require(%q): %v, want %q", keys, err, want)
		}
	}
}

// A required property the file misspelt is named beside the one missing (the class
// never reads the typo, so the unread check, which suggests, does not run first);
// a property far from it, or one that is required itself, is not suggested.
func TestRequireNamesAMisspeltProperty(t *testing.T) {
	for _, c := range []struct {
		props map[string]any
		keys  []string
		want  string
	}{
		{map[string]any{"outptu": "x", "failRate": 0.1}, []string{"output"}, `property "output" is required (the file gives "outptu": is it "output" misspelt?)`},
		{map[string]any{"conflicts": []any{"a"}, "table": "t"}, []string{"table", "conflict"}, `property "conflict" is required (the file gives "conflicts": is it "conflict" misspelt?)`},
		{map[string]any{"Output": "x"}, []string{"output"}, `property "output" is required (the file gives "Output": is it "output" misspelt?)`},
		{map[string]any{"failRate": 0.1}, []string{"output"}, `property "output" is required`},
		{map[string]any{"value": 1}, []string{"value", "key"}, `property "key" is required`},
	} {
		err := component.Spec{Properties: c.props}.Require(c.keys...)
		if err == nil || !strings.HasSuffix(err.Error(), c.want) {
			t.Errorf("Require(%v) of %v: %v, want it to end %q", c.keys, c.props, err, c.want)
		}
	}
}
