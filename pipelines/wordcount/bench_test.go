package wordcount

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
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
		nats      bool // hosts engines, each with its own connection to an embedded NATS server
	}{{"tracking=on/observe=off", 1, false, 1, false, false}, {"tracking=on/observe=on", 1, true, 1, false, false}, {"tracking=off", 0, false, 1, false, false},
		{"tracking=on/serialize", 1, false, 1, true, false}, {"tracking=on/hosts=3/serialize", 1, false, 3, false, false},
		{"tracking=on/nats/hosts=1", 1, false, 1, false, true}, {"tracking=on/nats/hosts=2", 1, false, 2, false, true},
		{"tracking=on/nats/hosts=3", 1, false, 3, false, true}} {
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
			var secs, cpu float64
			var url string
			if tc.nats {
				url = benchServer(b)
			}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				opts := Options{Files: files, Config: cfg, RuntimeOptions: ropts, Hosts: tc.hosts}
				if tc.hosts > 1 && !tc.nats {
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
				if tc.nats {
					opts.tap, opts.TransportOf = natsTransports(url, cfg, tc.hosts, i)
				}
				cpu0 := cpuSeconds()
				res, err := Run(context.Background(), opts)
				cpu += cpuSeconds() - cpu0
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
			b.ReportMetric(cpu/float64(words)*1e6, "cpu-s/Mword")
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

// cpuSeconds is the process's user and system CPU time so far (an embedded NATS
// server's included).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// benchServer starts an embedded NATS server on loopback for one benchmark.
func benchServer(b *testing.B) string {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		b.Fatal(err)
	}
	srv.Start()
	b.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats server not ready")
	}
	return srv.ClientURL()
}

// natsTransports gives each of hosts engines its own connection and transport (local
// delivery on, so only messages between engines cross the server), under a prefix of
// its own for run i.
func natsTransports(url string, cfg topology.Config, hosts, run int) (func(*topology.Topology), func(int) (transport.Transport, error)) {
	var streams *codec.Streams
	var endpoints func(int) bool
	tap := func(topo *topology.Topology) {
		streams = codec.NewStreams(topo)
		byComp, ackers := engine.TaskIDs(topo, cfg)
		tasks := len(ackers)
		for _, ids := range byComp {
			tasks += len(ids)
		}
		endpoints = natstransport.Endpoints(tasks, hosts)
	}
	return tap, func(host int) (transport.Transport, error) {
		nc, err := nats.Connect(url, nats.Name(fmt.Sprintf("wordcount host %d", host)))
		if err != nil {
			return nil, err
		}
		return natstransport.New(nc, streams, natstransport.WithPrefix(fmt.Sprintf("bench.r%d", run)),
			natstransport.WithEndpoints(endpoints), natstransport.WithLocalDelivery(), natstransport.WithOwnedConn())
	}
}
