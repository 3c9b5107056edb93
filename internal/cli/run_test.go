package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// The word count file of the repository (testdata/flux/wordcount.yaml, as docs/flux.md
// runs it) and the book it counts here: A Study in Scarlet, whole (5,156 lines,
// CRLF, a byte-order mark), with a filter file of this test's.
const (
	wordcountFlux = "../../testdata/flux/wordcount.yaml"
	runBook       = "../../testdata/books/244-0.txt"
)

// writeFilter writes a --filter file for wordcount.yaml and returns its path and
// the counts file the run writes.
func writeFilter(t *testing.T, failRate float64) (filter, counts string) {
	t.Helper()
	dir := t.TempDir()
	counts = filepath.Join(dir, "counts.tsv")
	filter = filepath.Join(dir, "run.properties")
	text := fmt.Sprintf("input=%s\noutput: %s\nfailRate=%v\n", runBook, counts, failRate)
	if err := os.WriteFile(filter, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return filter, counts
}

// gale run of the word count file to its natural end: it stops by itself once every
// line is acked (failed lines replayed: split and count fail 3% of what they get),
// exit 0, and the counts file equals the book counted here, independently of
// package wordcount: every maximal run of Unicode letters and decimal digits of each
// line, lowercased; any other character, an invalid UTF-8 byte included, separates.
func TestRunWordCountToItsEnd(t *testing.T) {
	filter, countsFile := writeFilter(t, 0.03)
	var out, errb bytes.Buffer
	if code := runWith([]string{"run", wordcountFlux, "--filter", filter}, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	stderr := errb.String()
	if !strings.Contains(stderr, "gale: stopping (every spout's input is done and every tree completed)") {
		t.Fatalf("the run did not end by itself:\n%s", stderr)
	}
	got := readCounts(t, countsFile)
	want, lines := countBook(t, runBook)
	if !maps.Equal(got, want) {
		n := 0
		for w, c := range want {
			if got[w] != c && n < 10 {
				t.Errorf("count[%q] = %d, want %d", w, got[w], c)
				n++
			}
		}
		t.Fatalf("%d distinct words counted, want %d", len(got), len(want))
	}
	// Every line acked once; the failed ones were emitted again.
	m := regexp.MustCompile(`spout lines: emitted (\d+), acked (\d+), failed (\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no spout summary:\n%s", stderr)
	}
	emitted, _ := strconv.Atoi(m[1])
	acked, _ := strconv.Atoi(m[2])
	failed, _ := strconv.Atoi(m[3])
	if acked != lines || failed == 0 || emitted != acked+failed {
		t.Fatalf("spout: emitted %d, acked %d, failed %d; want %d acked, some failed and replayed", emitted, acked, failed, lines)
	}
	t.Logf("%d lines, %d distinct words (the: %d); %d lines failed and replayed", lines, len(want), want["the"], failed)
}

// readCounts reads word<TAB>count lines.
func readCounts(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		w, n, ok := strings.Cut(l, "\t")
		c, err := strconv.ParseUint(n, 10, 64)
		if !ok || err != nil || counts[w] != 0 {
			t.Fatalf("%s: bad line %q", path, l)
		}
		counts[w] = c
	}
	return counts
}

// countBook counts the words of a file line by line (see TestRunWordCountToItsEnd).
func countBook(t *testing.T, path string) (map[string]uint64, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]uint64{}
	lines := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines++
		var word []rune
		flush := func() {
			if len(word) > 0 {
				counts[strings.ToLower(string(word))]++
				word = word[:0]
			}
		}
		for s := sc.Text(); s != ""; {
			r, size := utf8.DecodeRuneInString(s)
			s = s[size:]
			if (r != utf8.RuneError || size > 1) && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
				word = append(word, r)
			} else {
				flush()
			}
		}
		flush()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines < 5000 || len(counts) < 5000 {
		t.Fatalf("%s: %d lines, %d distinct words: not the book", path, lines, len(counts))
	}
	return counts, lines
}

// --dry-run prints the topology as built (components, classes, parallelism, emitted
// streams, groupings, the config it would run with) and starts nothing: no counts
// file.
func TestRunDryRun(t *testing.T) {
	filter, countsFile := writeFilter(t, 0)
	var out, errb bytes.Buffer
	if code := runWith([]string{"run", "--dry-run", wordcountFlux, "--filter", filter}, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	want := `topology wordcount: 1 spout, 2 bolts, 5 tasks

COMPONENT  KIND   CLASS                         PARALLELISM  EMITS
lines      spout  gale.wordcount.LineSpout      1            default [line, pos]
split      bolt   gale.wordcount.SplitSentence  2            default [word, pos, off]
count      bolt   gale.wordcount.WordCount      2            -

FROM   STREAM   TO     GROUPING
lines  default  split  SHUFFLE
split  default  count  FIELDS [word]

CONFIG                                 VALUE
topology.workers                       1
topology.acker.executors               2
topology.max.spout.pending             1000
topology.message.timeout.secs          30
topology.enable.message.timeouts       true
topology.executor.receive.buffer.size  16384
topology.transfer.batch.size           256
topology.batch.flush.interval.millis   10
topology.debug                         false
`
	if out.String() != want {
		t.Errorf("--dry-run printed:\n%s\nwant:\n%s", out.String(), want)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr: %s", errb.String())
	}
	if _, err := os.Stat(countsFile); !os.IsNotExist(err) {
		t.Errorf("a dry run wrote %s (%v)", countsFile, err)
	}
}

// A file with three mistakes is refused with each at its FILE:LINE:COL, exit 2,
// before anything starts.
func TestRunRefusesABadFile(t *testing.T) {
	var out, errb bytes.Buffer
	code := runWith([]string{"run", "testdata/run/bad.yaml"}, &out, &errb)
	if code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, errb.String())
	}
	want := []string{
		`testdata/run/bad.yaml:4:3: topology.acker.executors: want an integer, got string "two"`,
		`testdata/run/bad.yaml:9:9: component "lines" (class "gale.wordcount.LineSpout"): invalid spec: constructorArgs[0]: stat no/such/book.txt: no such file or directory`,
		`testdata/run/bad.yaml:12:16: "split": unknown class "gale.wordcount.SplitSentense"; did you mean "gale.wordcount.SplitSentence"?`,
	}
	lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), errb.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n%s\nwant it to start\n%s", i+1, lines[i], w)
		}
	}
	if out.Len() != 0 {
		t.Errorf("stdout: %s", out.String())
	}
	if _, err := os.Stat("testdata/run/counts.tsv"); !os.IsNotExist(err) {
		t.Errorf("something started: counts.tsv exists (%v)", err)
	}
}

// runTestClasses are classes of these tests, for a spout that never runs out:
// test.Endless emits 0, 1, 2... as tracked tuples (field n) and is no
// topology.FiniteSpout; test.Ack acks what it gets.
func runTestClasses() []component.Declaration {
	return []component.Declaration{
		{Class: "test.Endless", Doc: "emits 0, 1, 2... forever",
			Spout: func(component.Spec) (func() topology.Spout, error) {
				return func() topology.Spout { return &runEndlessSpout{} }, nil
			},
			Outputs: func(component.Spec) ([]component.Output, error) {
				return []component.Output{{Fields: []string{"n"}}}, nil
			},
		},
		{Class: "test.Ack", Doc: "acks every input",
			BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) {
				return func() topology.BasicBolt { return runAckBolt{} }, nil
			},
		},
	}
}

// runTestApp is gale with runTestClasses; TestMain runs it as a child with
// GALE_TEST_BUILD=run.
func runTestApp() *App {
	a := galeApp()
	for _, d := range runTestClasses() {
		if err := a.Components.Register(d); err != nil {
			panic(err)
		}
	}
	return a
}

type runEndlessSpout struct {
	out topology.SpoutCollector
	n   int
}

func (s *runEndlessSpout) Open(_ context.Context, _ topology.TaskContext, out topology.SpoutCollector) error {
	s.out = out
	return nil
}
func (s *runEndlessSpout) NextTuple() {
	s.n++
	_ = s.out.Emit(tuple.Values{s.n}, s.n)
}
func (s *runEndlessSpout) Ack(any)      {}
func (s *runEndlessSpout) Fail(any)     {}
func (s *runEndlessSpout) Close() error { return nil }

type runAckBolt struct{}

func (runAckBolt) Prepare(context.Context, topology.TaskContext) error { return nil }
func (runAckBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }
func (runAckBolt) Cleanup() error                                      { return nil }

var _ topology.BasicBolt = runAckBolt{}

// spoutDrained checks a run's summary: the spout's every tree acked (emitted ==
// acked, nothing failed, pending or abandoned) after some were emitted.
func spoutDrained(t *testing.T, stderr, spout string) {
	t.Helper()
	m := regexp.MustCompile(`spout ` + spout + `: emitted (\d+), acked (\d+), failed 0 \(timed out 0\), pending 0, abandoned 0\n`).FindStringSubmatch(stderr)
	if m == nil || m[1] != m[2] || m[1] == "0" {
		t.Fatalf("the spout's trees were not all acked by the drain:\n%s", stderr)
	}
}

// --ttl ends a run of a spout that never runs out, with a drain, exit 0; the keys
// gale does not know are listed in one line at start.
func TestRunTTL(t *testing.T) {
	var out, errb bytes.Buffer
	code := runTestApp().Run(context.Background(), []string{"run", "testdata/run/endless.yaml", "--ttl", "300ms"}, &out, &errb)
	stderr := errb.String()
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if !strings.HasPrefix(stderr, "gale: ignored config keys (gale does not know them): nimbus.seeds, storm.zookeeper.port\n") {
		t.Errorf("no ignored keys line first:\n%s", stderr)
	}
	if !strings.Contains(stderr, "gale: stopping (--ttl 300ms passed): draining\n") {
		t.Fatalf("not stopped by --ttl:\n%s", stderr)
	}
	spoutDrained(t, stderr, "numbers")
}

// SIGTERM to a gale run child (its spout never runs out) ends it after a drain:
// every tree emitted is acked, exit 0.
func TestRunSIGTERMDrains(t *testing.T) {
	cmd := childSpawner([]string{"run", "testdata/run/endless.yaml"})
	cmd.Env = append(cmd.Env, "GALE_TEST_BUILD=run")
	var stderr testio.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("child stderr:\n%s", stderr.String())
		}
	})
	// Signals are caught from before the engine starts: once it says it runs, a
	// SIGTERM is a stop.
	waitfor.True(t, 30*time.Second, "the child to run the topology", func() bool {
		return strings.Contains(stderr.String(), "gale: running topology endless")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("child: %v", err)
		}
	case <-time.After(60 * time.Second): // a hang, not a slow machine
		t.Fatal("the child did not exit after SIGTERM")
	}
	s := stderr.String()
	if !strings.Contains(s, "gale: stopping (SIGTERM): draining\n") {
		t.Fatalf("not stopped by SIGTERM:\n%s", s)
	}
	spoutDrained(t, s, "numbers")
}
