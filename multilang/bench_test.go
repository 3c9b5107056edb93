package multilang_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/multilang"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// The benchmarks of issue 29 §4: tuples/s through a Python pass-through bolt,
// against the same JSON lines read and written by a Python loop alone (the limit
// for the language), and out of a Node spout. They report tuples/s, timed from the
// first tuple to the last (the programs' start and the topology's stop excluded),
// and are benchmarks, not timed tests: nothing fails on a figure. docs/performance.md
// has the command and the figures.

// benchConfig is the default configuration (max spout pending 5000, batches of
// 256), in local mode, logging warnings only.
func benchConfig() topology.Config {
	cfg := topology.DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return cfg
}

// pids records the programs a topology started, to check none outlives its stop.
type pids struct {
	mu      sync.Mutex
	list    []int
	started chan struct{} // closed at the first start
	at      time.Time     // when the first started
}

func newPids() *pids { return &pids{started: make(chan struct{})} }

func (p *pids) onStart(_ topology.TaskContext, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, pid)
	if len(p.list) == 1 {
		p.at = time.Now()
		close(p.started)
	}
}

// stopAndCheck stops the topology and fails the benchmark if a program it started
// still exists (killing it, so that none is left behind either way).
func (p *pids) stopAndCheck(b *testing.B, rt *engine.Runtime) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		b.Errorf("Stop: %v", err)
	}
	<-rt.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pid := range p.list {
		if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
			b.Errorf("program pid %d still exists after the stop (%v)", pid, err)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

// benchWait waits for done, or fails after a generous bound (a hang, not a timing
// assertion).
func benchWait(b *testing.B, done <-chan struct{}, what string) {
	b.Helper()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%s: not within 5 minutes", what)
	}
}

// gatedSpout emits n tracked tuples (int64(i), message id i) once gate is closed,
// and closes done when every tree completed.
type gatedSpout struct {
	topology.BaseSpout
	n, next, acked int
	gate, done     chan struct{}
	open           bool
	end            time.Time
}

func (s *gatedSpout) NextTuple() {
	if !s.open {
		select {
		case <-s.gate:
			s.open = true
		case <-time.After(time.Millisecond):
			return
		}
	}
	if s.next < s.n {
		_ = s.Out.Emit(tuple.Values{int64(s.next)}, s.next)
		s.next++
	}
}

func (s *gatedSpout) Ack(any) {
	if s.acked++; s.acked == s.n {
		s.end = time.Now()
		close(s.done)
	}
}

// A failed tree is replayed (none fails in a healthy run; a timeout would).
func (s *gatedSpout) Fail(id any) { _ = s.Out.Emit(tuple.Values{int64(id.(int))}, id) }

// ackSink acks every input and counts them.
type ackSink struct {
	topology.BaseBolt
	n    atomic.Int64
	want int64
	done chan struct{}
	end  time.Time
}

func (s *ackSink) Execute(in *tuple.Tuple) {
	_ = s.Out.Ack(in)
	if s.n.Add(1) == s.want && s.done != nil {
		s.end = time.Now()
		close(s.done)
	}
}

// A Go spout's b.N tracked tuples through a Python bolt (testdata/passthrough.py:
// emit anchored, ack) to a Go sink; timed from the gate's opening, the program
// already started, to the last tree's completion at the spout.
func BenchmarkPythonPassThroughBolt(b *testing.B) {
	need(b, "python3")
	p := newPids()
	spout := &gatedSpout{n: b.N, gate: make(chan struct{}), done: make(chan struct{})}
	tb := topology.NewBuilder()
	tb.SetSpout("nums", func() topology.Spout { return spout }, 1).Output("n")
	tb.SetBolt("pass", multilang.ShellBolt([]string{"python3", "passthrough.py"}, "testdata",
		multilang.OnStart(p.onStart)), 1).ShuffleGrouping("nums").Output("n")
	tb.SetBolt("sink", func() topology.Bolt { return &ackSink{} }, 1).ShuffleGrouping("pass")
	topo, err := tb.Build()
	if err != nil {
		b.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer p.stopAndCheck(b, rt)
	benchWait(b, p.started, "the Python bolt's start")
	heap := sampleHeap()
	b.ResetTimer()
	start := time.Now()
	close(spout.gate)
	benchWait(b, spout.done, "every tree acked")
	b.StopTimer()
	b.ReportMetric(float64(b.N)/spout.end.Sub(start).Seconds(), "tuples/s")
	b.ReportMetric(heap.peak(), "peak-heap-MiB")
}

// heapSampler tracks the largest HeapInuse seen every 20 ms: the same figure at
// 10,000 and at 300,000 tuples says memory does not grow with the tuples passed.
type heapSampler struct {
	stop chan struct{}
	done chan float64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan float64, 1)}
	go func() {
		var ms runtime.MemStats
		var most uint64
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			most = max(most, ms.HeapInuse)
			select {
			case <-h.stop:
				h.done <- float64(most) / (1 << 20)
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// peak stops the sampler and returns the largest HeapInuse it saw, in MiB.
func (h *heapSampler) peak() float64 {
	close(h.stop)
	return <-h.done
}

// The limit for BenchmarkPythonPassThroughBolt: testdata/jsonloop.py, no gale, sent
// b.N tuple messages as the shell bolt writes them (one write each) and read until
// its b.N acks; it writes the emit and the ack the pass-through bolt writes.
func BenchmarkPythonJSONLoopAlone(b *testing.B) {
	need(b, "python3")
	cmd := exec.Command("python3", "jsonloop.py")
	cmd.Dir = "testdata"
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { // stdin closed, the program exits; killed if it does not
		_ = stdin.Close()
		t := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		if err := cmd.Wait(); err != nil {
			b.Errorf("jsonloop.py: %v", err)
		}
		t.Stop()
	}()
	n := b.N
	b.ResetTimer()
	start := time.Now()
	writeErr := make(chan error, 1)
	go func() {
		var buf []byte
		for i := 0; i < n; i++ {
			// As encoding/json writes the shell bolt's map: keys sorted.
			buf = append(buf[:0], `{"comp":"nums","id":"`...)
			buf = strconv.AppendInt(buf, int64(i+1), 10)
			buf = append(buf, `","stream":"default","task":1,"tuple":[`...)
			buf = strconv.AppendInt(buf, int64(i), 10)
			buf = append(buf, "]}\nend\n"...)
			if _, err := stdin.Write(buf); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	r := bufio.NewReaderSize(stdout, 64<<10)
	emits, acks := 0, 0
	for acks < n {
		line, err := r.ReadSlice('\n')
		if err != nil {
			b.Fatalf("reading jsonloop.py after %d acks: %v", acks, err)
		}
		switch {
		case bytes.HasPrefix(line, []byte(`{"command": "ack"`)):
			acks++
		case bytes.HasPrefix(line, []byte(`{"command": "emit"`)):
			emits++
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := <-writeErr; err != nil {
		b.Fatal(err)
	}
	if emits != n {
		b.Errorf("%d emits for %d acks", emits, n)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "tuples/s")
}

// A Node spout (testdata/countspout.js) emitting b.N tuples with message ids to a Go
// sink that acks them; timed from the program's start (its handshake answered) to
// the sink's b.N-th tuple.
func BenchmarkNodeSpout(b *testing.B) {
	need(b, "node")
	p := newPids()
	sink := &ackSink{want: int64(b.N), done: make(chan struct{})}
	tb := topology.NewBuilder()
	tb.SetSpout("count", multilang.ShellSpout([]string{"node", "countspout.js"}, "testdata",
		multilang.Env("GALE_COUNT_N="+strconv.Itoa(b.N)), multilang.OnStart(p.onStart)), 1).Output("n")
	tb.SetBolt("sink", func() topology.Bolt { return sink }, 1).ShuffleGrouping("count")
	topo, err := tb.Build()
	if err != nil {
		b.Fatal(err)
	}
	rt, err := engine.Start(context.Background(), topo, benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer p.stopAndCheck(b, rt)
	benchWait(b, p.started, "the Node spout's start")
	b.ResetTimer()
	benchWait(b, sink.done, "every tuple at the sink")
	b.StopTimer()
	p.mu.Lock()
	start := p.at
	p.mu.Unlock()
	b.ReportMetric(float64(b.N)/sink.end.Sub(start).Seconds(), "tuples/s")
}
