package builtin_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/builtin"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
)

// Found by a breaker: a Count or Sum whose output names a directory was built,
// ran to its end and then failed to write its results (the rename onto a
// directory), losing the whole run's counts; refused at build instead, as the
// file sink refuses a directory.
func TestWordsRefuseOutputDirectory(t *testing.T) {
	dir := t.TempDir()
	if _, err := builtin.NewCountBolt(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("NewCountBolt(%s): %v, want refused: a directory", dir, err)
	}
	if _, err := builtin.NewSumBolt("n", dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("NewSumBolt(n, %s): %v, want refused: a directory", dir, err)
	}
	reg := registry(t)
	for class, props := range map[string]map[string]any{
		builtin.CountBoltClass: {"output": dir},
		builtin.SumBoltClass:   {"output": dir, "value": "n"},
	} {
		_, err := reg.Add(topology.NewBuilder(), "c", class, component.Spec{Properties: props}, 1)
		var se *component.SpecError
		if !errors.As(err, &se) || se.Prop != "output" || !strings.Contains(err.Error(), "is a directory") {
			t.Errorf("%s with output %s: %v, want refused at property output: a directory", class, dir, err)
		}
	}
}

// Found by a breaker: Sum took the strings "NaN" and "Inf" (strconv.ParseFloat
// reads them) as numbers, so one such value made its key's sum NaN or Inf for
// good; they are no numbers of a sum: reported and left out, as "abc" is.
func TestWordsSumNumberRefusesNonFinite(t *testing.T) {
	for _, v := range []any{"NaN", "nan", "Inf", "+Inf", "-Infinity", "infinity", math.NaN(), math.Inf(1), float32(math.Inf(-1)), "1e999"} {
		if n, err := wordcount.Number(v); err == nil {
			t.Errorf("Number(%T %v) = %v, want an error", v, v, n)
		}
	}
	for v, want := range map[any]float64{"2.5": 2.5, " -3 ": -3, 7: 7, 1e308: 1e308} {
		if n, err := wordcount.Number(v); err != nil || n != want {
			t.Errorf("Number(%T %v) = %v, %v; want %v", v, v, n, err, want)
		}
	}
}

// Found by a breaker: Count wrote its keys as they were, so a key holding a tab
// or a line end (a JSON element "a\tb") broke the key<TAB>count file: a line
// with two tabs, or a forged line ("x\t999\ny" read as key x counted 999).
// Keys are escaped as the tsv line format escapes (\\ \t \n \r): one line per key.
func TestWordsCountEscapesKeys(t *testing.T) {
	in := writeLines(t,
		`["x\t999\ny", "plain", "a\\b", "cr\r"]`,
		`["x\t999\ny", "plain"]`,
	)
	out := filepath.Join(t.TempDir(), "counts.tsv")
	files, err := builtin.NewFilesSpout([]string{in})
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt(builtin.WithSplitJSON(), builtin.WithInjectedFailures(0.3, 3))
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(out, builtin.WithCountKey("element"))
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("lines", files.Spout, 1).Output(files.Fields()...)
	b.SetBasicBolt("split", split.BasicBolt, 2).ShuffleGrouping("lines").Output(split.Fields()...)
	b.SetBolt("count", count.Bolt, 2).FieldsGrouping("split", "element")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.Ackers = 1
	run(t, topo, cfg)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "a\\\\b\t1\ncr\\r\t1\nplain\t2\nx\\t999\\ny\t2\n"
	if string(got) != want {
		t.Errorf("counts file\n%q\nwant\n%q", got, want)
	}
}

// Found by a breaker: a Count whose key its input does not carry (the default
// "word" over the files spout's lines, say) failed every tuple, and the files
// spout replayed each for ever: the run never ended, logging a panic per
// replay (30,000 in 3 s). Count, Sum and Split now refuse such an input when
// their task starts, naming the field and the stream.
func TestWordsRefuseInputWithoutTheirFields(t *testing.T) {
	in := writeLines(t, "a b", "c d")
	out := filepath.Join(t.TempDir(), "out.tsv")
	files, err := builtin.NewFilesSpout([]string{in})
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(out)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := builtin.NewSumBolt("amount", out, builtin.WithCountKey("line"))
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt(builtin.WithSplitField("text"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		wire func(b *topology.Builder)
		want string
	}{
		"count": {func(b *topology.Builder) { b.SetBolt("count", count.Bolt, 2).ShuffleGrouping("lines") },
			`count reads field "word", which stream "default" of lines does not have (its fields [line, pos])`},
		"sum": {func(b *topology.Builder) { b.SetBolt("sum", sum.Bolt, 1).FieldsGrouping("lines", "line") },
			`sum reads field "amount", which stream "default" of lines does not have`},
		"split": {func(b *topology.Builder) {
			b.SetBasicBolt("split", split.BasicBolt, 1).ShuffleGrouping("lines").Output(split.Fields()...)
		}, `split reads field "text", which stream "default" of lines does not have`},
	} {
		b := topology.NewBuilder()
		b.SetSpout("lines", files.Spout, 1).Output(files.Fields()...)
		c.wire(b)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg := topology.DefaultConfig()
		cfg.Logger = slog.New(slog.DiscardHandler)
		rt, err := engine.Start(context.Background(), topo, cfg)
		if err == nil {
			_ = rt.Stop(context.Background())
			t.Errorf("%s: started, want refused: %s", name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %s", name, err, c.want)
		}
	}
}

// The files spout's edge inputs, counted exactly under replays (split and count
// failing a fifth of what they get): an empty file, a last line without a
// newline, CRLF line ends, a byte-order mark, a 10 MB line, several files by one
// glob.
func TestWordsFilesEdgeInputsCountExactly(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat(strings.Repeat("x", 999)+" ", 10_000) // a 10 MB line of 10,000 words
	for name, text := range map[string]string{
		"a-empty.txt": "",
		"b-nonl.txt":  "alpha beta\nalpha",
		"c-crlf.txt":  "Alpha\r\nbeta\r\n\r\n",
		"d-bom.txt":   "\ufeffbeta gamma\n",
		"e-long.txt":  "gamma\n" + long + "\ntail",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "counts.tsv")
	files, err := builtin.NewFilesSpout([]string{filepath.Join(dir, "*.txt")})
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt(builtin.WithInjectedFailures(0.2, 5))
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(out, builtin.WithInjectedFailures(0.2, 6))
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
	cfg.Ackers = 1
	run(t, topo, cfg)
	want := map[string]uint64{"alpha": 3, "beta": 3, "gamma": 2, "tail": 1, strings.Repeat("x", 999): 10_000}
	if got := countsOf(t, out); !maps.Equal(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
}

// Found by a breaker: a piece's zero value (a FilesSpout, SplitBolt, CountBolt
// or LineSink not made by its constructor) crashed the process in engine.Start
// (a nil factory called), or, the LineSink, failed every tuple on a nil writer.
// Each refuses to start instead, naming its constructor.
func TestWordsZeroValuesRefuseToStart(t *testing.T) {
	in := writeLines(t, "a b")
	files, err := builtin.NewFilesSpout([]string{in})
	if err != nil {
		t.Fatal(err)
	}
	var zeroFiles builtin.FilesSpout
	var zeroSplit builtin.SplitBolt
	var zeroCount builtin.CountBolt
	var zeroLine builtin.LineSink
	for name, c := range map[string]struct {
		wire func(b *topology.Builder)
		want string
	}{
		"files": {func(b *topology.Builder) { b.SetSpout("zero", zeroFiles.Spout, 1).Output("line", "pos") }, "a zero FilesSpout, made by no constructor: make it with NewFilesSpout"},
		"split": {func(b *topology.Builder) { b.SetBasicBolt("zero", zeroSplit.BasicBolt, 1).ShuffleGrouping("lines") }, "a zero SplitBolt"},
		"count": {func(b *topology.Builder) { b.SetBolt("zero", zeroCount.Bolt, 1).ShuffleGrouping("lines") }, "a zero CountBolt"},
		"line":  {func(b *topology.Builder) { b.SetBolt("zero", zeroLine.Bolt, 1).ShuffleGrouping("lines") }, "a zero LineSink"},
	} {
		b := topology.NewBuilder()
		b.SetSpout("lines", files.Spout, 1).Output(files.Fields()...)
		c.wire(b)
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg := topology.DefaultConfig()
		cfg.Logger = slog.New(slog.DiscardHandler)
		rt, err := engine.Start(context.Background(), topo, cfg)
		if err == nil {
			_ = rt.Stop(context.Background())
			t.Errorf("%s: started, want refused: %s", name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %s", name, err, c.want)
		}
	}
}

// gale.spout.Files with parallelism 2 in a Flux file: its line ids are one
// sequence, which the count's dedupe relies on, so the start is refused, naming
// the class (holds).
func TestWordsFilesSpoutParallelismRefused(t *testing.T) {
	dir := t.TempDir()
	in := writeLines(t, "a b")
	path := filepath.Join(dir, "p.yaml")
	doc := `name: par
spouts:
  - id: lines
    className: gale.spout.Files
    parallelism: 2
    constructorArgs: ["` + in + `"]
bolts:
  - id: count
    className: gale.bolt.Count
    properties:
      - {name: key, value: line}
      - {name: output, value: "` + filepath.Join(dir, "out.tsv") + `"}
streams:
  - {from: lines, to: count, grouping: {type: FIELDS, args: [line]}}
`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Build(registry(t))
	if err != nil {
		t.Fatal(err)
	}
	b.Config.Logger = slog.New(slog.DiscardHandler)
	rt, err := engine.Start(context.Background(), b.Topology, b.Config)
	if err == nil {
		_ = rt.Stop(context.Background())
		t.Fatal("started with a files spout of 2 tasks")
	}
	if !strings.Contains(err.Error(), "gale.spout.Files runs as one task: parallelism 2, want 1") {
		t.Errorf("%v, want it to name the class and the parallelism", err)
	}
}

// Split in json mode over bad input, under replays: text that is no JSON, an
// object, a truncated array (its elements before the break are counted, the
// rest reported), nested arrays and objects (counted by their compact text):
// each line acked, the run ends, the counts exact (holds).
func TestWordsSplitJSONBadInputCountsExactly(t *testing.T) {
	in := writeLines(t,
		`[1, [2, 3], {"b": 1, "a": [ 1 ]}, "x"]`,
		`not json`,
		`{"a": 1}`,
		`"str"`,
		`[1, 2`,
		`[]`,
		`[[2,3]]`,
		``,
	)
	out := filepath.Join(t.TempDir(), "counts.tsv")
	files, err := builtin.NewFilesSpout([]string{in})
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt(builtin.WithSplitJSON(), builtin.WithInjectedFailures(0.3, 9))
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(out, builtin.WithCountKey("element"), builtin.WithInjectedFailures(0.3, 10))
	if err != nil {
		t.Fatal(err)
	}
	b := topology.NewBuilder()
	b.SetSpout("lines", files.Spout, 1).Output(files.Fields()...)
	b.SetBasicBolt("split", split.BasicBolt, 2).ShuffleGrouping("lines").Output(split.Fields()...)
	b.SetBolt("count", count.Bolt, 2).FieldsGrouping("split", "element")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := topology.DefaultConfig()
	cfg.Ackers = 1
	run(t, topo, cfg)
	want := map[string]uint64{"1": 2, "2": 1, "[2,3]": 2, `{"b":1,"a":[1]}`: 1, "x": 1}
	if got := countsOf(t, out); !maps.Equal(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
}

// Found by a breaker: a Count built once and run twice (a Go program running its
// topology again, a test's second case) wrote nothing the second time, silently:
// its tasks' stops counted on from the first run's, and the first run's counts
// would have been added in. Each run now writes its own counts.
func TestWordsCountRunTwiceWritesEachRun(t *testing.T) {
	in := writeLines(t, "a b a", "b c")
	out := filepath.Join(t.TempDir(), "counts.tsv")
	files, err := builtin.NewFilesSpout([]string{in})
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt()
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(out, builtin.WithInjectedFailures(0.2, 4))
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
	cfg.Ackers = 1
	want := map[string]uint64{"a": 2, "b": 2, "c": 1}
	for i := range 2 {
		if err := os.Remove(out); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		run(t, topo, cfg)
		if _, err := os.Stat(out); err != nil {
			t.Fatalf("run %d: no counts file: %v", i+1, err)
		}
		if got := countsOf(t, out); !maps.Equal(got, want) {
			t.Errorf("run %d: counts %v, want %v", i+1, got, want)
		}
	}
}

// Found by a breaker: failRate with topology.acker.executors: 0 was taken, but
// without acker tasks a failed line is not replayed: it is lost, and the counts
// came out short with no error. Refused at build (Split, Count, Sum; and Go's
// WithoutAckers with WithInjectedFailures).
func TestWordsRefuseFailRateWithoutAckers(t *testing.T) {
	reg := registry(t)
	out := filepath.Join(t.TempDir(), "out.tsv")
	noAckers := map[string]any{"topology.acker.executors": 0}
	for class, props := range map[string]map[string]any{
		builtin.SplitBoltClass: {"failRate": 0.05},
		builtin.CountBoltClass: {"failRate": 0.05, "output": out},
		builtin.SumBoltClass:   {"failRate": 0.05, "output": out, "value": "n"},
	} {
		_, err := reg.Add(topology.NewBuilder(), "c", class, component.Spec{Properties: props, Config: noAckers}, 1)
		var se *component.SpecError
		if !errors.As(err, &se) || se.Prop != "failRate" || !strings.Contains(err.Error(), "injected failures need acker tasks") {
			t.Errorf("%s: %v, want refused at failRate: injected failures need acker tasks", class, err)
		}
		// With ackers, or without failures, it builds.
		if _, err := reg.Add(topology.NewBuilder(), "c", class, component.Spec{Properties: props}, 1); err != nil {
			t.Errorf("%s with ackers: %v", class, err)
		}
	}
	if _, err := builtin.NewCountBolt(out, builtin.WithoutAckers(), builtin.WithInjectedFailures(0.1, 1)); err == nil || !strings.Contains(err.Error(), "option failRate") {
		t.Errorf("NewCountBolt(WithoutAckers, WithInjectedFailures): %v, want refused", err)
	}
}

// Found by a breaker: a Count of several tasks wired with SHUFFLE (or ALL)
// grouping counted a replayed occurrence again when it reached another task
// than its first attempt did (each task dedupes its own), or once per task:
// counts too high, silently. Such an input is refused when its task starts:
// FIELDS (on any fields: a replay carries the same values) or GLOBAL, or one task.
func TestWordsCountRefusesRandomGrouping(t *testing.T) {
	in := writeLines(t, strings.Repeat("a b c d e f g h ", 20), "a b")
	out := filepath.Join(t.TempDir(), "counts.tsv")
	files, err := builtin.NewFilesSpout([]string{in})
	if err != nil {
		t.Fatal(err)
	}
	split, err := builtin.NewSplitBolt()
	if err != nil {
		t.Fatal(err)
	}
	count, err := builtin.NewCountBolt(out, builtin.WithInjectedFailures(0.3, 2))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		wire func(d *topology.Declarer)
		par  int
		want string // "" runs, exact
	}{
		"shuffle":          {func(d *topology.Declarer) { d.ShuffleGrouping("split") }, 3, `count takes stream "default" of split by shuffle grouping`},
		"all":              {func(d *topology.Declarer) { d.AllGrouping("split") }, 2, `count takes stream "default" of split by all grouping`},
		"local-or-shuffle": {func(d *topology.Declarer) { d.LocalOrShuffleGrouping("split") }, 2, "by local-or-shuffle grouping"},
		"fields on pos":    {func(d *topology.Declarer) { d.FieldsGrouping("split", "pos") }, 3, ""},
		"global":           {func(d *topology.Declarer) { d.GlobalGrouping("split") }, 2, ""},
		"shuffle, 1 task":  {func(d *topology.Declarer) { d.ShuffleGrouping("split") }, 1, ""},
	} {
		b := topology.NewBuilder()
		b.SetSpout("lines", files.Spout, 1).Output(files.Fields()...)
		b.SetBasicBolt("split", split.BasicBolt, 2).ShuffleGrouping("lines").Output(split.Fields()...)
		c.wire(b.SetBolt("count", count.Bolt, c.par))
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		cfg := topology.DefaultConfig()
		cfg.Ackers = 1
		if c.want == "" {
			os.Remove(out)
			run(t, topo, cfg)
			want := map[string]uint64{"a": 21, "b": 21, "c": 20, "d": 20, "e": 20, "f": 20, "g": 20, "h": 20}
			if got := countsOf(t, out); !maps.Equal(got, want) {
				t.Errorf("%s: counts %v, want %v", name, got, want)
			}
			continue
		}
		cfg.Logger = slog.New(slog.DiscardHandler)
		rt, err := engine.Start(context.Background(), topo, cfg)
		if err == nil {
			_ = rt.Stop(context.Background())
			t.Errorf("%s: started, want refused: %s", name, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %s", name, err, c.want)
		}
	}
}
