package wordcount

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/transporttest"
)

// BenchmarkWordCount runs the word-count job end to end on the testdata books (read 4
// times per run, about 3.7 million words) and reports words/s, with tracking on (1
// acker task, max spout pending 5000) and off (0 ackers), with GOGC=400 as the CLI.
// With observe=on the run also records execute and process latency histograms,
// samples 1% of the trees' lineage, and is scraped as the UI and Prometheus would: a
// History observation every 2 s and a /metrics gather every second. Issue 4 allows
// observe=on at most 10% below observe=off.
func BenchmarkWordCount(b *testing.B) {
	books, err := filepath.Glob("../../testdata/books/*.txt")
	if err != nil || len(books) == 0 {
		b.Fatal("no testdata books")
	}
	// As `gale wordcount` does (unless GOGC is set): tuples are short-lived garbage.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	var files []string
	for range 4 {
		files = append(files, books...)
	}
	for _, tc := range []struct {
		name    string
		ackers  int
		observe bool // latency histograms, 1% lineage and a /metrics scrape per run
		// hosts > 1: that many engines over a transport that serialises every
		// message (transporttest.Faulty with no faults); serialize: one engine with
		// engine.WithSerialization.
		hosts     int
		serialize bool
	}{{"tracking=on/observe=off", 1, false, 1, false}, {"tracking=on/observe=on", 1, true, 1, false}, {"tracking=off", 0, false, 1, false},
		{"tracking=on/serialize", 1, false, 1, true}, {"tracking=on/hosts=3/serialize", 1, false, 3, false}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := topology.DefaultConfig()
			cfg.Ackers = tc.ackers
			cfg.LatencyMetrics = tc.observe
			var ropts []engine.Option
			if tc.serialize {
				ropts = append(ropts, engine.WithSerialization())
			}
			var rec *lineage.Recorder
			if tc.observe {
				var err error
				if rec, err = lineage.New(lineage.DefaultConfig()); err != nil {
					b.Fatal(err)
				}
				ropts = append(ropts, engine.WithLineage(rec))
			}
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			var words uint64
			var secs float64
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				opts := Options{Files: files, Config: cfg, RuntimeOptions: ropts, Hosts: tc.hosts}
				if tc.hosts > 1 {
					var streams *codec.Streams
					opts.tap = func(topo *topology.Topology) { streams = codec.NewStreams(topo) }
					opts.Transport = transporttest.NewFaulty(transport.NewLocal(), transporttest.Serialize(
						func(m *transport.Message) (*transport.Message, error) { return codec.Clone(m, streams) }))
				}
				stop, scraped := make(chan struct{}), make(chan struct{})
				if tc.observe {
					opts.Started = func(rt *engine.Runtime) {
						go scrape(rt, rec, stop, scraped)
					}
				} else {
					close(scraped)
				}
				res, err := Run(context.Background(), opts)
				close(stop)
				<-scraped
				if err != nil {
					b.Fatal(err)
				}
				if res.Unacked != 0 || res.Misuse != 0 {
					b.Fatalf("unacked %d, misuse %d", res.Unacked, res.Misuse)
				}
				words += res.Words
				secs += res.Elapsed.Seconds()
			}
			b.ReportMetric(float64(words)/secs, "words/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkWordCountOneGoroutine is the floor: the same files, tokenizer and counting
// in one goroutine with no framework, no tracking and no dedupe.
// scrape reads rt as the UI and a Prometheus server would, until stop is closed.
func scrape(rt *engine.Runtime, rec *lineage.Recorder, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	hist := metrics.NewHistory(metrics.HistoryConfig{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector("wordcount", rt, rt.Started(), hist, rec))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			if n%2 == 0 {
				hist.Observe(now, rt.Stats())
			}
			if _, err := reg.Gather(); err != nil {
				panic(err)
			}
		}
	}
}

func BenchmarkWordCountOneGoroutine(b *testing.B) {
	books, _ := filepath.Glob("../../testdata/books/*.txt")
	var words uint64
	var secs float64
	for i := 0; i < b.N; i++ {
		start := time.Now()
		counts := map[string]uint64{}
		for range 4 {
			for _, name := range books {
				f, err := os.Open(name)
				if err != nil {
					b.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				for sc.Scan() {
					Words(sc.Text(), func(w string, _ int) { counts[w]++; words++ })
				}
				f.Close()
			}
		}
		secs += time.Since(start).Seconds()
	}
	b.ReportMetric(float64(words)/secs, "words/s")
	b.ReportMetric(0, "ns/op")
}
