package wordcount

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// ackCounter is a collector that counts acks and fails, safe for concurrent use.
type ackCounter struct{ acked, failed atomic.Uint64 }

func (c *ackCounter) Emit(tuple.Values, ...*tuple.Tuple) error           { panic("Emit") }
func (c *ackCounter) EmitTo(string, tuple.Values, ...*tuple.Tuple) error { panic("EmitTo") }
func (c *ackCounter) EmitDirect(int, string, tuple.Values, ...*tuple.Tuple) error {
	panic("EmitDirect")
}
func (c *ackCounter) Ack(*tuple.Tuple) error             { c.acked.Add(1); return nil }
func (c *ackCounter) Fail(*tuple.Tuple) error            { c.failed.Add(1); return nil }
func (c *ackCounter) FailWith(*tuple.Tuple, error) error { c.failed.Add(1); return nil }
func (c *ackCounter) ResetTimeout(*tuple.Tuple) error    { return nil }
func (c *ackCounter) ReportError(error)                  {}

// BenchmarkChangelogCount runs two count tasks (task indexes 0 and 1, one goroutine
// each, as two count tasks on two workers) against an embedded NATS server that
// fsyncs every JetStream write (sync_interval: always, as gale's nats node), each
// executing b.N distinct word occurrences of a book and then draining, and reports
// words/s over both: the changelog's cost alone, without the engine and the
// transport. The sub-benchmarks vary the batch size and the batches in flight.
func BenchmarkChangelogCount(b *testing.B) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: b.TempDir(), SyncAlways: true})
	if err != nil {
		b.Fatal(err)
	}
	s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		b.Fatal("nats server not ready")
	}
	js := connectJS(b, s.ClientURL())
	if err := EnsureClusterState(testCtx(b, 10*time.Second), js, "gale-wordcount", 1); err != nil {
		b.Fatal(err)
	}
	var words []string
	f, err := os.Open(testio.Books(b)[0])
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		Words(sc.Text(), func(w string, _ int) { words = append(words, w) })
	}
	f.Close()
	run := 0
	for _, batch := range []int{2048, 8192} {
		for _, inflight := range []int{1, 4} {
			b.Run(fmt.Sprintf("batch=%d/inflight=%d", batch, inflight), func(b *testing.B) {
				run++
				conf := &clusterConf{files: []string{"/none"}, js: js, bucket: "gale-wordcount",
					run: fmt.Sprintf("bench%d", run), flushInterval: DefaultFlushInterval}
				ctx := testCtx(b, 10*time.Minute)
				const tasks = 2
				bolts := make([]*changelogCount, tasks)
				outs := make([]*ackCounter, tasks)
				ins := make([][]*tuple.Tuple, tasks)
				for i := range tasks {
					bolts[i] = &changelogCount{conf: conf, batchMax: batch, inFlightMax: inflight}
					outs[i] = &ackCounter{}
					tc := topology.TaskContext{Component: "count", TaskID: 10 + i, TaskIndex: i, Parallelism: tasks,
						Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
					if err := bolts[i].Prepare(ctx, tc, outs[i]); err != nil {
						b.Fatal(err)
					}
					ins[i] = make([]*tuple.Tuple, b.N)
					for j := range b.N {
						ins[i][j] = wordTuple(words[j%len(words)], uint64(j)*16, 0)
					}
				}
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for i := range tasks {
					wg.Go(func() {
						for _, t := range ins[i] {
							bolts[i].Execute(t)
						}
						bolts[i].Drain()
					})
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				for i := range tasks {
					if err := bolts[i].Cleanup(); err != nil {
						b.Fatal(err)
					}
					if a, f := outs[i].acked.Load(), outs[i].failed.Load(); a != uint64(b.N) || f != 0 {
						b.Fatalf("task %d: acked %d failed %d of %d", i, a, f, b.N)
					}
				}
				b.ReportMetric(float64(tasks*b.N)/el.Seconds(), "words/s")
			})
		}
	}
}
