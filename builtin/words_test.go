package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

const book = "../testdata/books/244-0.txt"

func registry(t testing.TB) *component.Registry {
	t.Helper()
	var reg component.Registry
	for _, d := range builtin.Components() {
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	return &reg
}

// Every bad option of the four classes is refused when the topology is built, as
// a *component.SpecError placed at its argument or property (so a Flux file gets
// FILE:LINE:COL), with a message naming what is wrong.
func TestWordsRefuseBadOptions(t *testing.T) {
	reg := registry(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out.tsv")
	onCluster := &component.Cluster{Topology: "t"}
	abs, err := filepath.Abs(book)
	if err != nil {
		t.Fatal(err)
	}
	props := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		class string
		spec  component.Spec
		arg   int    // the SpecError's Arg, or -1
		prop  string // its Prop
		want  string
	}{
		{builtin.FilesSpoutClass, component.Spec{}, -1, "", "name at least one text file"},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{""}}, 0, "", `constructorArgs[0] "": an empty path`},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{book, "no/such/file.txt"}}, 1, "", "constructorArgs[1] \"no/such/file.txt\": stat no/such/file.txt: no such file"},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{"../testdata"}}, 0, "", "is not a regular file"},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{"../testdata/books/*.nope"}}, 0, "", "matches no file"},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{"[a-"}}, 0, "", "syntax error in pattern"},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{3}}, 0, "", "constructorArgs[0]: want a string, got integer 3"},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{book}, Cluster: onCluster}, 0, "", "not an absolute path: on a cluster"},
		{builtin.FilesSpoutClass, component.Spec{Args: []any{abs}, Properties: props("field", "x")}, -1, "field", `property "field" is not used (the class reads no properties)`},
		{builtin.SplitBoltClass, component.Spec{Properties: props("mode", "csv")}, -1, "mode", `property mode: "csv": want words`},
		{builtin.SplitBoltClass, component.Spec{Properties: props("field", "")}, -1, "field", `property field: "": a field name (leave the property out`},
		{builtin.SplitBoltClass, component.Spec{Properties: props("as", " w")}, -1, "as", `property as: " w": a field name`},
		{builtin.SplitBoltClass, component.Spec{Properties: props("as", "pos")}, -1, "as", `"pos" is a field split emits already`},
		{builtin.SplitBoltClass, component.Spec{Properties: props("failRate", 1.0)}, -1, "failRate", "property failRate: 1: must be at least 0 and below 1"},
		{builtin.SplitBoltClass, component.Spec{Properties: props("failRate", "often")}, -1, "failRate", `property "failRate": want a number, got string "often"`},
		{builtin.SplitBoltClass, component.Spec{Properties: props("seed", -2)}, -1, "seed", "property seed: -2: must be at least 0"},
		{builtin.SplitBoltClass, component.Spec{Properties: props("feild", "line")}, -1, "feild", `property "feild" is not used; did you mean "field"?`},
		{builtin.CountBoltClass, component.Spec{}, -1, "", `property "output" is required`},
		{builtin.CountBoltClass, component.Spec{Properties: props("output", "")}, -1, "output", "property output: empty"},
		{builtin.CountBoltClass, component.Spec{Properties: props("output", "no/such/dir/c.tsv")}, -1, "output", "property output: no/such/dir: no such directory"},
		{builtin.CountBoltClass, component.Spec{Properties: props("output", out, "key", "off")}, -1, "key", `property key: "off" is the occurrence's identity`},
		{builtin.CountBoltClass, component.Spec{Properties: props("output", out, "key", 7)}, -1, "key", `property "key": want a string, got integer 7`},
		{builtin.CountBoltClass, component.Spec{Properties: props("output", "c.tsv"), Cluster: onCluster}, -1, "output", `property output: "c.tsv": not an absolute path`},
		{builtin.CountBoltClass, component.Spec{Properties: props("output", out), Cluster: onCluster, Config: map[string]any{"topology.acker.executors": 0}}, -1, "output", "needs acker tasks"},
		{builtin.CountBoltClass, component.Spec{Properties: props("output", out, "value", "n")}, -1, "value", `property "value" is not used`},
		{builtin.SumBoltClass, component.Spec{Properties: props("output", out)}, -1, "", `property "value" is required`},
		{builtin.SumBoltClass, component.Spec{Properties: props("value", "n")}, -1, "", `property "output" is required`},
		{builtin.SumBoltClass, component.Spec{Properties: props("output", out, "value", "")}, -1, "value", `property value: "": a field name`},
		{builtin.SumBoltClass, component.Spec{Properties: props("output", out, "value", "word")}, -1, "value", `property value: "word" is the key too`},
		{builtin.SumBoltClass, component.Spec{Properties: props("output", out, "value", "pos")}, -1, "value", `"pos" is the occurrence's identity`},
	} {
		_, err := reg.Add(topology.NewBuilder(), "c", c.class, c.spec, 1)
		var se *component.SpecError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v; want a SpecError with %q", c.class, c.spec, err, c.want)
			continue
		}
		if se.Arg != c.arg || se.Prop != c.prop {
			t.Errorf("%s %+v: placed at arg %d prop %q, want arg %d prop %q (%v)", c.class, c.spec, se.Arg, se.Prop, c.arg, c.prop, err)
		}
	}
}

// The Go constructors refuse what the classes refuse, and an option that is not
// the piece's, naming it.
func TestWordsGoRefuseBadOptions(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.tsv")
	for _, c := range []struct {
		name string
		make func() error
		want string
	}{
		{"Files none", func() error { return errOf(builtin.NewFilesSpout(nil)) }, "gale.spout.Files: constructorArgs: name at least one text file"},
		{"Files key", func() error { return errOf(builtin.NewFilesSpout([]string{book}, builtin.WithCountKey("w"))) }, "gale.spout.Files: WithCountKey is not one of its options (WithClusterState)"},
		{"Files relative on a cluster", func() error {
			return errOf(builtin.NewFilesSpout([]string{book}, builtin.WithClusterState(component.Cluster{Topology: "t"})))
		}, "not an absolute path"},
		{"Split mode", func() error { return errOf(builtin.NewSplitBolt(builtin.WithSplitAs("off"))) }, `gale.bolt.Split: option as: "off" is a field split emits already`},
		{"Split empty field", func() error { return errOf(builtin.NewSplitBolt(builtin.WithSplitField(""))) }, `gale.bolt.Split: option field: "": a field name`},
		{"Count empty key", func() error { return errOf(builtin.NewCountBolt(out, builtin.WithCountKey(""))) }, `gale.bolt.Count: option key: "": a field name`},
		{"Split key", func() error { return errOf(builtin.NewSplitBolt(builtin.WithCountKey("w"))) }, "gale.bolt.Split: WithCountKey is not one of its options (WithSplitField, WithSplitJSON, WithSplitAs, WithInjectedFailures)"},
		{"Split rate", func() error { return errOf(builtin.NewSplitBolt(builtin.WithInjectedFailures(-0.1, 1))) }, "failRate: -0.1: must be at least 0"},
		{"Count output", func() error { return errOf(builtin.NewCountBolt("")) }, "gale.bolt.Count: option output: empty"},
		{"Count JSON", func() error { return errOf(builtin.NewCountBolt(out, builtin.WithSplitJSON())) }, "gale.bolt.Count: WithSplitJSON is not one of its options"},
		{"Count no ackers on a cluster", func() error {
			return errOf(builtin.NewCountBolt(out, builtin.WithoutAckers(), builtin.WithClusterState(component.Cluster{Topology: "t"})))
		}, "needs acker tasks"},
		{"Sum value", func() error { return errOf(builtin.NewSumBolt("", out)) }, "gale.bolt.Sum: option value: \"\": a field name"},
		{"Sum key = value", func() error { return errOf(builtin.NewSumBolt("n", out, builtin.WithCountKey("n"))) }, `option value: "n" is the key too`},
	} {
		err := c.make()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// errOf is a constructor's error.
func errOf[T any](_ T, err error) error { return err }

// run starts topo, waits until its spouts are exhausted and stops it.
func run(t *testing.T, topo *topology.Topology, cfg topology.Config) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler) // injected failures warn
	rt, err := engine.Start(context.Background(), topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-rt.Exhausted():
	case <-time.After(60 * time.Second): // a hang, not a slow machine
		t.Error("the spouts' trees did not all complete")
	}
	if err := rt.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// runFile runs testdata/flux/words.yaml with input, output and failRate.
func runFile(t *testing.T, input, output string, failRate float64) {
	t.Helper()
	filter := filepath.Join(t.TempDir(), "run.properties")
	if err := os.WriteFile(filter, fmt.Appendf(nil, "input=%s\noutput=%s\nfailRate=%v\n", input, output, failRate), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load("../testdata/flux/words.yaml", flux.Options{Filter: filter})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Build(registry(t))
	if err != nil {
		t.Fatal(err)
	}
	run(t, b.Topology, b.Config)
}

func readTSV(t testing.TB, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		k, v, ok := strings.Cut(l, "\t")
		if _, dup := m[k]; !ok || dup {
			t.Fatalf("%s: bad line %q", path, l)
		}
		m[k] = v
	}
	return m
}

func countsOf(t testing.TB, path string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for k, v := range readTSV(t, path) {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, k, err)
		}
		m[k] = n
	}
	return m
}

// The word count of built-ins (testdata/flux/words.yaml) counts a book exactly,
// with split and count failing 5% of what they get: failed lines are replayed and
// no occurrence is counted twice.
func TestWordsFluxFileCountsExactly(t *testing.T) {
	out := filepath.Join(t.TempDir(), "counts.tsv")
	runFile(t, book, out, 0.05)
	want, err := wordcount.CountFiles([]string{book})
	if err != nil {
		t.Fatal(err)
	}
	if got := countsOf(t, out); !maps.Equal(got, want) {
		t.Fatalf("%d distinct words counted, want %d (the: %d, want %d)", len(got), len(want), got["the"], want["the"])
	}
	t.Logf("%d distinct words, the: %d", len(want), want["the"])
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// parity emits (parity, n, pos, off) for split's JSON numbers: the key and value
// a Sum reads, the occurrence passed on.
type parity struct{}

func (parity) Prepare(context.Context, topology.TaskContext) error { return nil }
func (parity) Cleanup() error                                      { return nil }
func (parity) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	n := t.ValueByField("n").(int)
	return out.Emit(tuple.Values{[]string{"even", "odd"}[n&1], n, t.ValueByField("pos"), t.ValueByField("off")})
}

// A topology built in Go of the pieces: JSON arrays split into their elements,
// summed by a key and counted by element, each element once though a third of
// what split and sum get fails and is replayed; and a count of lines (no off
// field: one occurrence per line).
func TestWordsGoJSONSumAndLines(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	wantSum := map[string]int{}
	wantCount := map[string]uint64{}
	wantLines := map[string]uint64{}
	for i := range 300 {
		l := fmt.Sprintf("[%d, %d,%d ]", i, i%7, 1000000)
		if i%10 == 0 {
			l = "[]"
		}
		lines = append(lines, l)
		wantLines[l]++
		if l != "[]" {
			for _, n := range []int{i, i % 7, 1000000} {
				wantSum[[]string{"even", "odd"}[n&1]] += n
				wantCount[strconv.Itoa(n)]++
			}
		}
	}
	in := writeLines(t, lines...)
	files, err := builtin.NewFilesSpout([]string{in})
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt(builtin.WithSplitJSON(), builtin.WithSplitAs("n"), builtin.WithInjectedFailures(0.3, 7))
	if err != nil {
		t.Fatal(err)
	}
	sumOut, countOut, linesOut := filepath.Join(dir, "sum.tsv"), filepath.Join(dir, "count.tsv"), filepath.Join(dir, "lines.tsv")
	sum, err := builtin.NewSumBolt("n", sumOut, builtin.WithCountKey("parity"), builtin.WithInjectedFailures(0.3, 8))
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(countOut, builtin.WithCountKey("n"))
	if err != nil {
		t.Fatal(err)
	}
	countLines, err := builtin.NewCountBolt(linesOut, builtin.WithCountKey("line"))
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("lines", files.Spout, 1).Output(files.Fields()...)
	b.SetBasicBolt("split", split.BasicBolt, 2).ShuffleGrouping("lines").Output(split.Fields()...)
	b.SetBasicBolt("parity", func() topology.BasicBolt { return parity{} }, 2).ShuffleGrouping("split").Output("parity", "n", "pos", "off")
	b.SetBolt("sum", sum.Bolt, 2).FieldsGrouping("parity", "parity")
	b.SetBolt("count", count.Bolt, 3).FieldsGrouping("split", "n")
	b.SetBolt("countLines", countLines.Bolt, 2).FieldsGrouping("lines", "line")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.Ackers = 1
	run(t, topo, cfg)

	gotSum := readTSV(t, sumOut)
	if len(gotSum) != 2 || gotSum["even"] != strconv.Itoa(wantSum["even"]) || gotSum["odd"] != strconv.Itoa(wantSum["odd"]) {
		t.Errorf("sums %v, want %v", gotSum, wantSum)
	}
	if got := countsOf(t, countOut); !maps.Equal(got, wantCount) {
		t.Errorf("counts of %d elements, want %d: 1000000: %d, want %d", len(got), len(wantCount), got["1000000"], wantCount["1000000"])
	}
	if got := countsOf(t, linesOut); !maps.Equal(got, wantLines) {
		t.Errorf("counts of lines %v, want %v", got, wantLines)
	}
}

// JSONElements gives each element's value and the byte where it starts.
func TestJSONElements(t *testing.T) {
	var got []string
	err := wordcount.JSONElements(` [ "a b", 2, 2.5,{"k": [1, 2]}, [ ], true, null,-3 ]`, func(v any, off int) {
		got = append(got, fmt.Sprintf("%d:%T:%v", off, v, v))
	})
	want := []string{`3:string:a b`, `10:int:2`, `13:float64:2.5`, `17:string:{"k":[1,2]}`, `32:string:[]`, `37:bool:true`, `43:<nil>:<nil>`, `48:int:-3`}
	if err != nil || !slicesEqual(got, want) {
		t.Fatalf("%v, %v; want %v", got, err, want)
	}
	for text, msg := range map[string]string{`{"a": 1}`: "not a JSON array", `[1, 2`: "", `[1] [2]`: "text after its closing ]", ``: "not a JSON array"} {
		if err := wordcount.JSONElements(text, func(any, int) {}); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want an error with %q", text, err, msg)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Without acker tasks nothing is tracked: a line counts as acked when emitted, so
// the spout's low watermark passes lines still being counted. Count told so
// (WithoutAckers; in a Flux file, topology.acker.executors: 0) deduplicates nothing,
// and the counts are exact.
func TestWordsCountWithoutAckers(t *testing.T) {
	out := filepath.Join(t.TempDir(), "counts.tsv")
	files, err := builtin.NewFilesSpout([]string{book})
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt()
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(out, builtin.WithoutAckers())
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("lines", files.Spout, 1).Output(files.Fields()...)
	b.SetBasicBolt("split", split.BasicBolt, 2).ShuffleGrouping("lines").Output(split.Fields()...)
	b.SetBolt("count", count.Bolt, 2).FieldsGrouping("split", "word")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.Ackers = 0
	run(t, topo, cfg)
	want, err := wordcount.CountFiles([]string{book})
	if err != nil {
		t.Fatal(err)
	}
	if got := countsOf(t, out); !maps.Equal(got, want) {
		t.Fatalf("%d distinct words counted, want %d (the: %d, want %d)", len(got), len(want), got["the"], want["the"])
	}
}
