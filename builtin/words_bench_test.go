package builtin_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
)

// BenchmarkWordCountFluxVsGo is issue 30 §2: word count as a Flux file of
// built-ins (testdata/flux/words.yaml: files spout, split, count with its counts in
// memory, occurrence dedupe, written to a file at the end) beside gale wordcount's
// job (wordcount.Run, as `gale wordcount --out` runs it: 2 split and 2 count tasks,
// 1 acker task, max spout pending 5000, GOGC=400), in one run, over the 7 books of
// testdata/books. Each iteration runs one of each, in alternating order, and checks
// the file's counts equal the job's; it reports both words/s and their ratio
// (flux/go), which the issue wants at least 0.8.
//
//	go test -run '^$' -bench WordCountFluxVsGo -benchtime 6x ./builtin/
func BenchmarkWordCountFluxVsGo(b *testing.B) {
	books, err := filepath.Glob("../testdata/books/*.txt")
	if err != nil || len(books) != 7 {
		b.Fatalf("testdata/books: %v %v", books, err)
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400)) // as gale wordcount and gale run's workers
	}
	quiet := slog.New(slog.DiscardHandler)
	dir := b.TempDir()
	out, goOut := filepath.Join(dir, "counts.tsv"), filepath.Join(dir, "go-counts.tsv")
	filter := filepath.Join(dir, "bench.properties")
	if err := os.WriteFile(filter, []byte("input=../testdata/books/*.txt\noutput="+out+"\nfailRate=0\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := flux.Load("../testdata/flux/words.yaml", flux.Options{Filter: filter})
	if err != nil {
		b.Fatal(err)
	}
	reg := registry(b)

	goRun := func() (map[string]uint64, uint64, time.Duration) {
		cfg := topology.DefaultConfig()
		cfg.Ackers, cfg.MaxSpoutPending, cfg.MessageTimeout, cfg.Logger = 1, 5000, 30*time.Second, quiet
		start := time.Now()
		res, err := wordcount.Run(context.Background(), wordcount.Options{Files: books, Parallelism: 2, Config: cfg})
		if err != nil || res.Unacked != 0 {
			b.Fatalf("gale wordcount: %v, %d unacked", err, res.Unacked)
		}
		writeCounts(b, goOut, res.Counts) // as gale wordcount --out, after the run
		return res.Counts, res.Words, time.Since(start)
	}
	fluxRun := func() (map[string]uint64, time.Duration) {
		start := time.Now()
		built, err := f.Build(reg) // as gale run: built, then run
		if err != nil {
			b.Fatal(err)
		}
		cfg := built.Config
		cfg.Logger = quiet
		rt, err := engine.Start(context.Background(), built.Topology, cfg)
		if err != nil {
			b.Fatal(err)
		}
		<-rt.Exhausted()
		if err := rt.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start) // the counts file is written by the stop
		return countsOf(b, out), took
	}

	var goWords, fluxWords uint64
	var goTime, fluxTime time.Duration
	var pairs []float64 // each pair's flux/go, for its median: one pair slowed by the cores' other users moves it less
	b.ResetTimer()
	for i := range b.N {
		var want, got map[string]uint64
		var words uint64
		var gt, ft time.Duration
		if i%2 == 0 {
			want, words, gt = goRun()
			got, ft = fluxRun()
		} else {
			got, ft = fluxRun()
			want, words, gt = goRun()
		}
		if !maps.Equal(got, want) {
			b.Fatalf("the Flux file counted %d distinct words, gale wordcount %d", len(got), len(want))
		}
		goWords += words
		fluxWords += words
		goTime += gt
		fluxTime += ft
		pairs = append(pairs, gt.Seconds()/ft.Seconds())
	}
	slices.Sort(pairs)
	goRate := float64(goWords) / goTime.Seconds()
	fluxRate := float64(fluxWords) / fluxTime.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(goRate, "wordcount-words/s")
	b.ReportMetric(fluxRate, "flux-words/s")
	b.ReportMetric(fluxRate/goRate, "flux/go")
	b.ReportMetric(pairs[len(pairs)/2], "median-pair-flux/go")
}

// writeCounts writes word<TAB>count lines sorted by word, as gale wordcount --out
// does (internal/cli's writeCounts: a buffered write, no sync).
func writeCounts(b *testing.B, path string, counts map[string]uint64) {
	words := slices.Sorted(maps.Keys(counts))
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for _, word := range words {
		fmt.Fprintf(w, "%s\t%d\n", word, counts[word])
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
