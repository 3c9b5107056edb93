package component_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

type nopSpout struct{ topology.BaseSpout }

func (*nopSpout) NextTuple() {}

type nopBolt struct{ topology.BaseBolt }

func (*nopBolt) Execute(*tuple.Tuple) {}

type nopBasic struct{ topology.BaseBasicBolt }

func (*nopBasic) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

func spoutMaker(component.Spec) (func() topology.Spout, error) {
	return func() topology.Spout { return &nopSpout{} }, nil
}

func boltMaker(component.Spec) (func() topology.Bolt, error) {
	return func() topology.Bolt { return &nopBolt{} }, nil
}

func basicMaker(component.Spec) (func() topology.BasicBolt, error) {
	return func() topology.BasicBolt { return &nopBasic{} }, nil
}

func fields(names ...string) func(component.Spec) ([]component.Output, error) {
	return func(component.Spec) ([]component.Output, error) {
		return []component.Output{{Fields: names}}, nil
	}
}

// TestRegisterRefuses: each wrong declaration is an error wrapping ErrRegister that
// names the class, and the class stays unregistered.
func TestRegisterRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    component.Declaration
		kind component.Kind // 0 when not exactly one maker is set
		want string
	}{
		{"empty class", component.Declaration{Doc: "splits", Bolt: boltMaker}, component.BoltKind,
			`invalid declaration: empty class name (doc "splits")`},
		{"space in class", component.Declaration{Class: "word split", Bolt: boltMaker}, component.BoltKind,
			`class "word split": invalid declaration: ' ' at byte 4 (a class name has no spaces)`},
		{"tab in class", component.Declaration{Class: "a.B\t", Bolt: boltMaker}, component.BoltKind,
			`class "a.B\t": invalid declaration: '\t' at byte 3 (a class name has no spaces)`},
		{"two-line doc", component.Declaration{Class: "a.B", Doc: "splits\nlines", Bolt: boltMaker}, component.BoltKind,
			`class "a.B": invalid declaration: doc has a line break (listings show it on one line)`},
		{"tab in doc", component.Declaration{Class: "a.B", Doc: "splits\tlines", Bolt: boltMaker}, component.BoltKind,
			`class "a.B": invalid declaration: doc has control character "\t" at byte 6 (listings show it as one column)`},
		{"escape in doc", component.Declaration{Class: "a.B", Doc: "\x1b[31mred", Bolt: boltMaker}, component.BoltKind,
			`class "a.B": invalid declaration: doc has control character "\x1b" at byte 0 (listings show it as one column)`},
		{"class not UTF-8", component.Declaration{Class: "a.\x80B", Bolt: boltMaker}, component.BoltKind,
			`class "a.\x80B": invalid declaration: not valid UTF-8`},
		{"no kind", component.Declaration{Class: "a.B", Outputs: fields("x")}, 0,
			`class "a.B": invalid declaration: none of Spout, Bolt, BasicBolt and Value is set`},
		{"spout and bolt", component.Declaration{Class: "a.B", Spout: spoutMaker, Bolt: boltMaker}, 0,
			`class "a.B": invalid declaration: Spout and Bolt are set; set exactly one`},
		{"all three", component.Declaration{Class: "a.B", Spout: spoutMaker, Bolt: boltMaker, BasicBolt: basicMaker}, 0,
			`class "a.B": invalid declaration: Spout and Bolt and BasicBolt are set; set exactly one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r component.Registry
			err := r.Register(tc.d)
			if !errors.Is(err, component.ErrRegister) || err.Error() != tc.want {
				t.Fatalf("Register: %v\nwant: %s (wrapping ErrRegister)", err, tc.want)
			}
			if n := len(r.Classes()); n != 0 {
				t.Errorf("%d classes registered after a refused declaration", n)
			}
			if k := tc.d.Kind(); k != tc.kind {
				t.Errorf("Kind() = %v, want %v", k, tc.kind)
			}
		})
	}
}

func TestRegisterTwiceKeepsFirst(t *testing.T) {
	var r component.Registry
	if err := r.Register(component.Declaration{Class: "a.Split", Doc: "first", Bolt: boltMaker}); err != nil {
		t.Fatal(err)
	}
	err := r.Register(component.Declaration{Class: "a.Split", Doc: "second", Spout: spoutMaker})
	want := `class "a.Split": invalid declaration: registered twice (first as a bolt: "first")`
	if !errors.Is(err, component.ErrRegister) || err.Error() != want {
		t.Fatalf("second Register: %v\nwant: %s", err, want)
	}
	d, err := r.Lookup("a.Split")
	if err != nil || d.Doc != "first" || d.Kind() != component.BoltKind {
		t.Errorf("Lookup after a refused duplicate: %q %v %v, want the first (bolt)", d.Doc, d.Kind(), err)
	}
}

// TestLookupUnknownClass: the error names the class, suggests near misses (case,
// the last dotted part, a typo or two) and lists every class, sorted.
func TestLookupUnknownClass(t *testing.T) {
	var r component.Registry
	for _, c := range []string{"com.example.SplitSentence", "com.example.WordCount", "other.WordCount", "wordlen.Split", "wordlen.Spout"} {
		if err := r.Register(component.Declaration{Class: c, Bolt: boltMaker}); err != nil {
			t.Fatal(err)
		}
	}
	const list = " (registered: com.example.SplitSentence, com.example.WordCount, other.WordCount, wordlen.Split, wordlen.Spout)"
	for miss, want := range map[string]string{
		"wordlen.split":          `unknown class "wordlen.split"; did you mean "wordlen.Split"?` + list,
		"SplitSentence":          `unknown class "SplitSentence"; did you mean "com.example.SplitSentence"?` + list,
		"WordCount":              `unknown class "WordCount"; did you mean "com.example.WordCount" or "other.WordCount"?` + list,
		"wordlen.Splt":           `unknown class "wordlen.Splt"; did you mean "wordlen.Split"?` + list,
		"wordlen.Splut":          `unknown class "wordlen.Splut"; did you mean "wordlen.Split" or "wordlen.Spout"?` + list,
		"wordlen.Spot":           `unknown class "wordlen.Spot"; did you mean "wordlen.Spout"?` + list,
		"org.apache.LogInfoBolt": `unknown class "org.apache.LogInfoBolt"` + list,
		"":                       `unknown class ""` + list,
	} {
		_, err := r.Lookup(miss)
		if !errors.Is(err, component.ErrUnknownClass) || err.Error() != want {
			t.Errorf("Lookup(%q): %v\nwant: %s", miss, err, want)
		}
	}
	var empty component.Registry
	_, err := empty.Lookup("a.B")
	if want := `unknown class "a.B": no class is registered`; !errors.Is(err, component.ErrUnknownClass) || err.Error() != want {
		t.Errorf("Lookup on an empty registry: %v\nwant: %s", err, want)
	}
}

func TestClassesSortedWithKinds(t *testing.T) {
	var r component.Registry
	for _, d := range []component.Declaration{
		{Class: "z.Sink", Doc: "writes", Bolt: boltMaker},
		{Class: "a.Source", Doc: "reads", Spout: spoutMaker, Outputs: fields("x")},
		{Class: "m.Map", Doc: "maps", BasicBolt: basicMaker, Outputs: fields("x")},
	} {
		if err := r.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, d := range r.Classes() {
		got = append(got, fmt.Sprintf("%s %s %s", d.Class, d.Kind(), d.Doc))
	}
	want := []string{"a.Source spout reads", "m.Map basic bolt maps", "z.Sink bolt writes"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Classes: %q, want %q", got, want)
	}
	if s := component.Kind(0).String(); s != "Kind(0)" {
		t.Errorf("Kind(0).String() = %q", s)
	}
}

// TestRegistryConcurrentUse: Register, Lookup, Classes and Add from many goroutines
// (run under -race).
func TestRegistryConcurrentUse(t *testing.T) {
	var r component.Registry
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			class := fmt.Sprintf("c.Spout%d", i)
			if err := r.Register(component.Declaration{Class: class, Spout: spoutMaker, Outputs: fields("x")}); err != nil {
				t.Error(err)
				return
			}
			for j := range 20 {
				if _, err := r.Lookup(class); err != nil {
					t.Error(err)
				}
				_ = r.Classes()
				if _, err := r.Add(topology.NewBuilder(), fmt.Sprint("s", j), class, component.Spec{}, 1); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := len(r.Classes()); n != 8 {
		t.Errorf("%d classes, want 8", n)
	}
}

var errBadTopic = errors.New("no such topic")

// TestAddRefuses: every failure of Add names the component and its class, matches
// its sentinel or the maker's own error, and declares nothing on the builder.
func TestAddRefuses(t *testing.T) {
	var r component.Registry
	outs := func(o ...component.Output) func(component.Spec) ([]component.Output, error) {
		return func(component.Spec) ([]component.Output, error) { return o, nil }
	}
	for _, d := range []component.Declaration{
		{Class: "t.Source", Spout: spoutMaker, Outputs: fields("x")},
		{Class: "t.MakerError", Spout: func(component.Spec) (func() topology.Spout, error) {
			return nil, fmt.Errorf("topic %q: %w", "orders", errBadTopic)
		}},
		{Class: "t.MakerPanic", Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			_ = s.Args[3] // a maker that indexes Args itself instead of calling ArgString
			return nil, nil
		}},
		{Class: "t.NilFactory", BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) { return nil, nil }},
		{Class: "t.OutputsError", Bolt: boltMaker, Outputs: func(s component.Spec) ([]component.Output, error) {
			f, err := s.ArgStrings(0)
			return []component.Output{{Fields: f}}, err
		}},
		{Class: "t.OutputsPanic", Bolt: boltMaker, Outputs: func(component.Spec) ([]component.Output, error) { panic("no fields yet") }},
		{Class: "t.TwiceDefault", Bolt: boltMaker, Outputs: outs(component.Output{Fields: []string{"a"}}, component.Output{Stream: "default", Fields: []string{"b"}})},
		{Class: "t.Reserved", Bolt: boltMaker, Outputs: outs(component.Output{Stream: "__ack", Fields: []string{"a"}})},
		{Class: "t.EmptyField", Bolt: boltMaker, Outputs: outs(component.Output{Stream: "s", Fields: []string{"a", ""}})},
		{Class: "t.TwiceField", Bolt: boltMaker, Outputs: outs(component.Output{Fields: []string{"a", "a"}})},
		{Class: "t.Props", Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			if _, err := s.String("separator", " "); err != nil {
				return nil, err
			}
			if _, err := s.Int("minLength", 1); err != nil {
				return nil, err
			}
			return boltMaker(s)
		}},
		{Class: "t.OneArg", Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			if _, err := s.ArgString(0); err != nil {
				return nil, err
			}
			return boltMaker(s)
		}},
		{Class: "t.NoProps", Bolt: boltMaker},
	} {
		if err := r.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		class string
		spec  component.Spec
		is    error // nil: only the message is checked
		want  string
	}{
		{"t.Sourse", component.Spec{}, component.ErrUnknownClass,
			`component "c": unknown class "t.Sourse"; did you mean "t.Source"? (registered: t.EmptyField, t.MakerError, t.MakerPanic, t.NilFactory, t.NoProps, t.OneArg, t.OutputsError, t.OutputsPanic, t.Props, t.Reserved, t.Source, t.TwiceDefault, t.TwiceField)`},
		{"t.MakerError", component.Spec{}, errBadTopic,
			`component "c" (class "t.MakerError"): topic "orders": no such topic`},
		{"t.MakerPanic", component.Spec{}, nil,
			`component "c" (class "t.MakerPanic"): bolt maker panicked: runtime error: index out of range [3] with length 0`},
		{"t.NilFactory", component.Spec{}, nil,
			`component "c" (class "t.NilFactory"): basic bolt maker returned a nil factory and no error`},
		{"t.OutputsError", component.Spec{Args: []any{"a", 2}}, component.ErrSpec,
			`component "c" (class "t.OutputsError"): Outputs: invalid spec: constructorArgs[0]: want a list of strings, got string "a"`},
		{"t.OutputsPanic", component.Spec{}, nil,
			`component "c" (class "t.OutputsPanic"): Outputs panicked: no fields yet`},
		{"t.TwiceDefault", component.Spec{}, nil,
			`component "c" (class "t.TwiceDefault"): Outputs: stream "default" declared twice`},
		{"t.Reserved", component.Spec{}, nil,
			`component "c" (class "t.Reserved"): Outputs: stream id "__ack" is reserved (ids starting with __ are system ids)`},
		{"t.EmptyField", component.Spec{}, nil,
			`component "c" (class "t.EmptyField"): Outputs: stream "s": field 1 has an empty name`},
		{"t.TwiceField", component.Spec{}, nil,
			`component "c" (class "t.TwiceField"): Outputs: stream "default": field "a" is declared twice`},
		{"t.Props", component.Spec{Properties: map[string]any{"minLength": "3"}}, component.ErrSpec,
			`component "c" (class "t.Props"): invalid spec: property "minLength": want an integer, got string "3"`},
		{"t.Props", component.Spec{Properties: map[string]any{"seperator": ",", "minlength": 3, "minLength": 2}}, component.ErrSpec,
			`component "c" (class "t.Props"): invalid spec: property "minlength" is not used; did you mean "minLength"? (the class reads minLength, separator); property "seperator" is not used; did you mean "separator"? (the class reads minLength, separator)`},
		{"t.OneArg", component.Spec{}, component.ErrSpec,
			`component "c" (class "t.OneArg"): invalid spec: constructorArgs[0] is missing: the class takes at least 1, the file gives 0`},
		{"t.OneArg", component.Spec{Args: []any{"a", 2.5, nil}}, component.ErrSpec,
			`component "c" (class "t.OneArg"): invalid spec: constructorArgs[1] (number 2.5) is not used: the class read 1 of 3; constructorArgs[2] (null) is not used: the class read 1 of 3`},
		{"t.NoProps", component.Spec{Properties: map[string]any{"x": 1}}, component.ErrSpec,
			`component "c" (class "t.NoProps"): invalid spec: property "x" is not used (the class reads no properties)`},
	} {
		b := topology.NewBuilder()
		if _, err := r.Add(b, "src", "t.Source", component.Spec{}, 1); err != nil {
			t.Fatal(err)
		}
		d, err := r.Add(b, "c", tc.class, tc.spec, 1)
		if d != nil || err == nil || err.Error() != tc.want || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("Add %s %v: %v, %v\nwant: %s (wrapping %v)", tc.class, tc.spec, d, err, tc.want, tc.is)
			continue
		}
		// Nothing of "c" was declared: the builder holds the spout alone.
		topo, err := b.Build()
		if err != nil {
			t.Errorf("Build after a refused Add of %s: %v", tc.class, err)
		} else if len(topo.Components) != 1 {
			t.Errorf("after a refused Add of %s the topology has %d components, want 1", tc.class, len(topo.Components))
		}
	}
	if _, err := r.Add(nil, "c", "t.Source", component.Spec{}, 1); err == nil || err.Error() != `component "c" (class "t.Source"): nil builder` {
		t.Errorf("Add with a nil builder: %v", err)
	}
}

// TestAddDeclaresOutputs: the streams Outputs returns (from the Spec) are the
// component's, default, named and direct, and the builder's own checks still apply.
func TestAddDeclaresOutputs(t *testing.T) {
	var r component.Registry
	for _, d := range []component.Declaration{
		{Class: "t.Source", Spout: spoutMaker, Outputs: func(s component.Spec) ([]component.Output, error) {
			f, err := s.Strings("fields", []string{"line"})
			return []component.Output{
				{Fields: f},
				{Stream: "errors", Fields: []string{"error"}},
				{Stream: "to-task", Fields: []string{"n"}, Direct: true},
			}, err
		}},
		{Class: "t.Sink", Bolt: boltMaker},
	} {
		if err := r.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	b := topology.NewBuilder()
	if _, err := r.Add(b, "src", "t.Source", component.Spec{Properties: map[string]any{"fields": []any{"id", "body"}}}, 1); err != nil {
		t.Fatal(err)
	}
	sink, err := r.Add(b, "sink", "t.Sink", component.Spec{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	sink.FieldsGrouping("src", "body").Input("src", "errors", topology.Shuffle()).DirectGrouping("src", "to-task")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, id := range []string{"default", "errors", "to-task"} {
		s := topo.Component("src").Streams[id]
		got = append(got, fmt.Sprintf("%s %v direct=%t", id, s.Source.Fields, s.Direct))
	}
	want := "[default [id, body] direct=false errors [error] direct=false to-task [n] direct=true]"
	if fmt.Sprint(got) != want || len(topo.Component("src").Streams) != 3 {
		t.Errorf("streams %v, want %s", got, want)
	}
	if c := topo.Component("sink"); c.Parallelism != 3 || c.Bolt == nil || len(c.Streams) != 0 {
		t.Errorf("sink: parallelism %d, bolt %t, %d streams; want 3, true, 0", c.Parallelism, c.Bolt != nil, len(c.Streams))
	}

	// The id and parallelism are the builder's to check, at Build, as for any component.
	b = topology.NewBuilder()
	if _, err := r.Add(b, "__src", "t.Source", component.Spec{}, 0); err != nil {
		t.Fatalf("Add: %v (id and parallelism are Build's to check)", err)
	}
	_, err = b.Build()
	for _, want := range []string{`component id "__src" is reserved`, `component "__src": parallelism 0`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build: %v, want it to say %s", err, want)
		}
	}
}

// A class's TickEvery reaches the declared bolt: a batching sink made from a
// class flushes on its ticks (without them, its last partial batch waited for
// more input until the trees timed out).
func TestAddDeclaresTickEvery(t *testing.T) {
	var r component.Registry
	d := component.Declaration{Class: "x.Holder", TickEvery: 250 * time.Millisecond,
		BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) {
			return func() topology.BasicBolt { return nil }, nil
		}}
	if err := r.Register(d); err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("s", func() topology.Spout { return nil }, 1).Output("n")
	dec, err := r.Add(b, "h", "x.Holder", component.Spec{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	dec.ShuffleGrouping("s")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := topo.Component("h").TickEvery; got != 250*time.Millisecond {
		t.Errorf("TickEvery %v, want 250ms", got)
	}
}
