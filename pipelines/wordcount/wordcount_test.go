package wordcount

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// referenceCount counts words in one pass with no framework and a different
// tokenizer (strings.FieldsFunc over runes), as the independent check.
func referenceCount(t *testing.T, files []string) map[string]uint64 {
	t.Helper()
	counts := map[string]uint64{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range strings.FieldsFunc(string(data), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}) {
			counts[strings.ToLower(w)]++
		}
	}
	return counts
}

func quiet() topology.Config {
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

func diffCounts(got, want map[string]uint64) string {
	var b strings.Builder
	n := 0
	for w, c := range want {
		if got[w] != c && n < 10 {
			fmt.Fprintf(&b, "%q: got %d want %d\n", w, got[w], c)
			n++
		}
	}
	for w, c := range got {
		if _, ok := want[w]; !ok && n < 10 {
			fmt.Fprintf(&b, "%q: got %d, not a word\n", w, c)
			n++
		}
	}
	return b.String()
}

// With each bolt failing 5% of its inputs, lines are replayed many times, and every
// count still equals the independent single-pass count.
func TestWordCountExactUnderReplay(t *testing.T) {
	files := testio.Books(t)
	want := referenceCount(t, files)
	res, err := Run(context.Background(), Options{Files: files, FailRate: 0.05, Seed: 7, Config: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(res.Counts, want); d != "" || len(res.Counts) != len(want) {
		t.Fatalf("counts differ (%d words, want %d):\n%s", len(res.Counts), len(want), d)
	}
	var total uint64
	for _, c := range want {
		total += c
	}
	if res.Words != total || res.Lines != 97639 || res.Acked != res.Lines || res.Unacked != 0 || res.Misuse != 0 {
		t.Fatalf("words %d (want %d), lines %d acked %d unacked %d misuse %d", res.Words, total, res.Lines, res.Acked, res.Unacked, res.Misuse)
	}
	if res.Replays == 0 || res.Duplicates == 0 || res.Failed != res.Replays {
		t.Fatalf("replays %d, duplicates absorbed %d, failed trees %d", res.Replays, res.Duplicates, res.Failed)
	}
	t.Logf("%d lines, %d replays, %d duplicate occurrences absorbed", res.Lines, res.Replays, res.Duplicates)
}

// Without failures and without tracking the counts are the same.
func TestWordCountTrackingOff(t *testing.T) {
	files := testio.Books(t)[:2]
	want := referenceCount(t, files)
	cfg := quiet()
	cfg.Ackers = 0
	res, err := Run(context.Background(), Options{Files: files, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(res.Counts, want); d != "" || res.Replays != 0 {
		t.Fatalf("counts differ:\n%s", d)
	}
	if _, err := Run(context.Background(), Options{Files: files, Config: cfg, FailRate: 0.1}); err == nil {
		t.Fatal("fail rate with 0 ackers accepted")
	}
}

// dropper passes lines on, except that it never acks or fails the first attempt of
// every 50th line: those trees can only end by the message timeout.
type dropper struct {
	out     topology.OutputCollector
	seen    map[uint64]bool
	dropped *atomic.Int64
}

func (d *dropper) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	d.out, d.seen = out, map[uint64]bool{}
	return nil
}

func (d *dropper) Execute(t *tuple.Tuple) {
	id := t.ValueByField("pos").([]uint64)[0] // line_id
	if !d.seen[id] {
		d.seen[id] = true
		if len(d.seen)%50 == 0 {
			d.dropped.Add(1)
			return // neither ack nor fail: a lost ack
		}
	}
	_ = d.out.Emit(t.Values(), t)
	_ = d.out.Ack(t)
}

func (d *dropper) Cleanup() error { return nil }

// Lines whose acks are lost time out, are re-read from their file offsets and are
// counted once.
func TestWordCountTimeoutsReplay(t *testing.T) {
	files := testio.Books(t)[:2]
	want := referenceCount(t, files)
	cfg := quiet()
	cfg.MessageTimeout = time.Second
	var dropped atomic.Int64
	res, err := Run(context.Background(), Options{Files: files, Config: cfg,
		interpose: func() topology.Bolt { return &dropper{dropped: &dropped} }})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(res.Counts, want); d != "" || res.Unacked != 0 {
		t.Fatalf("unacked %d, counts differ:\n%s", res.Unacked, d)
	}
	if dropped.Load() == 0 || res.TimedOut < uint64(dropped.Load()) || res.Replays != res.Failed {
		t.Fatalf("dropped %d, timed out %d, failed %d, replays %d", dropped.Load(), res.TimedOut, res.Failed, res.Replays)
	}
	t.Logf("dropped %d, timed out %d, replays %d", dropped.Load(), res.TimedOut, res.Replays)
}

// A high fail rate still terminates with exact counts: occurrences already counted are
// acked as duplicates rather than failed again, so every attempt makes progress.
func TestWordCountHighFailRate(t *testing.T) {
	files := testio.Books(t)[3:4] // 244-0.txt, the shortest book
	want := referenceCount(t, files)
	res, err := Run(context.Background(), Options{Files: files, FailRate: 0.5, Seed: 11, Config: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if d := diffCounts(res.Counts, want); d != "" || res.Unacked != 0 || res.Replays == 0 {
		t.Fatalf("unacked %d replays %d, counts differ:\n%s", res.Unacked, res.Replays, d)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Config: quiet()}, "no input files"},
		{Options{Files: []string{"/nonexistent/book.txt"}, Config: quiet()}, "no such file"},
		{Options{Files: testio.Books(t), FailRate: 1, Config: quiet()}, "fail rate 1"},
		{Options{Files: testio.Books(t), FailRate: math.NaN(), Config: quiet()}, "fail rate NaN"},
	} {
		if _, err := Run(context.Background(), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%v) = %v, want %q", tc.opts.Files, err, tc.want)
		}
	}
}

func TestWords(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\ufeffThe Project Gutenberg EBook", "the project gutenberg ebook"},
		{"don't stop--ever\r", "don t stop ever"},
		{"Chapter 12: 1,000 £20", "chapter 12 1 000 20"},
		{"Élan Ωμέγα naïve", "élan ωμέγα naïve"},
		{"before\xa320,000 after", "before 20 000 after"}, // 141.txt's Latin-1 pound sign
		{"   ", ""},
		{"x", "x"},
	} {
		var got []string
		var offs []string
		Words(tc.in, func(w string, off int) {
			got = append(got, w)
			offs = append(offs, fmt.Sprint(off))
			if !strings.EqualFold(tc.in[off:off+len(w)], w) && !strings.HasPrefix(strings.ToLower(tc.in[off:]), w) {
				t.Errorf("%q: word %q not at offset %d", tc.in, w, off)
			}
		})
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("Words(%q) = %q, want %q", tc.in, g, tc.want)
		}
	}
}

func TestOccurrences(t *testing.T) {
	o := NewOccurrences()
	steps := []struct {
		occ, low uint64
		want     bool
	}{
		{5, 0, true},
		{5, 0, false},                        // a replayed copy
		{70_000, 0, true},                    // second page
		{OccurrenceID(1, 3), 0, true},        // another file
		{6, 1 << 16, false},                  // below the floor: its line completed
		{70_000, 1 << 16, false},             // still remembered above the floor
		{70_001, 1 << 16, true},              //
		{OccurrenceID(1, 3), 1 << 16, false}, //
	}
	for i, s := range steps {
		if got := o.Apply(s.occ, s.low); got != s.want {
			t.Fatalf("step %d: Apply(%d, %d) = %v, want %v", i, s.occ, s.low, got, s.want)
		}
	}
	if o.Pages() != 2 {
		t.Fatalf("%d pages held, want 2 (the first was freed)", o.Pages())
	}
}

// truncator fails the 100th line once, after truncating its file: the replay must find
// the text gone, report it and count the line as lost, never count other text.
type truncator struct {
	out  topology.OutputCollector
	path string
	n    int
	done bool
}

func (d *truncator) Prepare(_ context.Context, _ topology.TaskContext, out topology.OutputCollector) error {
	d.out = out
	return nil
}

func (d *truncator) Execute(t *tuple.Tuple) {
	d.n++
	if d.n == 100 && !d.done {
		d.done = true
		if err := os.Truncate(d.path, 0); err != nil {
			panic(err)
		}
		_ = d.out.Fail(t)
		return
	}
	_ = d.out.Emit(t.Values(), t)
	_ = d.out.Ack(t)
}

func (d *truncator) Cleanup() error { return nil }

func TestReplayOfChangedFileIsLostNotMiscounted(t *testing.T) {
	data, err := os.ReadFile(testio.Books(t)[3])
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "book.txt")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := quiet()
	cfg.MaxSpoutPending = 50 // the file is truncated long before it is read to the end
	res, err := Run(context.Background(), Options{Files: []string{path}, Config: cfg,
		interpose: func() topology.Bolt { return &truncator{path: path} }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Lost != 1 || res.Unacked != 1 || res.Acked != res.Lines-1 {
		t.Fatalf("lost %d unacked %d, acked %d of %d lines", res.Lost, res.Unacked, res.Acked, res.Lines)
	}
	if e := res.Stats.Components["lines"]; e.Errors != 1 || !strings.Contains(e.LastError, "the file changed since it was first read") {
		t.Fatalf("spout errors %d: %q", e.Errors, e.LastError)
	}
}
