package natstransport_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/transport/natstransport"
	"github.com/gale-stream/gale/tuple"
)

// wordJob is a word count whose spout replays failed lines and whose count bolt
// applies each word occurrence once, so counts are exact however often a line is
// replayed. The bolts record what they did in the job (the engines share this test's
// memory; they share nothing else).
type wordJob struct {
	lines []string

	mu       sync.Mutex
	acked    map[int]bool
	replays  int
	seen     map[int64]bool // occurrences counted
	counts   map[string]int
	taskOf   map[string]int // the count task each word went to
	misroute []string
	done     chan struct{}
	progress chan int // acked lines, each time a tenth more are
}

func newWordJob(n int) *wordJob {
	rng := rand.New(rand.NewPCG(7, 7))
	vocab := make([]string, 300)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%03d", i)
	}
	j := &wordJob{acked: map[int]bool{}, seen: map[int64]bool{}, counts: map[string]int{},
		taskOf: map[string]int{}, done: make(chan struct{}), progress: make(chan int, 16)}
	for range n {
		ws := make([]string, 4+rng.IntN(9))
		for i := range ws {
			ws[i] = vocab[rng.IntN(rng.IntN(len(vocab))+1)] // skewed: low words are frequent
		}
		j.lines = append(j.lines, strings.Join(ws, " "))
	}
	return j
}

func (j *wordJob) reference() map[string]int {
	want := map[string]int{}
	for _, l := range j.lines {
		for _, w := range strings.Fields(l) {
			want[w]++
		}
	}
	return want
}

func (j *wordJob) topology(t *testing.T) *topology.Topology {
	b := topology.NewBuilder()
	b.SetSpout("lines", func() topology.Spout { return &lineSpout{job: j} }, 1).Output("id", "line")
	b.SetBasicBolt("split", func() topology.BasicBolt { return &splitBolt{} }, 3).
		ShuffleGrouping("lines").Output("word", "occ")
	b.SetBolt("count", func() topology.Bolt { return &countBolt{job: j} }, 3).FieldsGrouping("split", "word")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

type lineSpout struct {
	topology.BaseSpout
	job    *wordJob
	next   int
	replay []int
}

func (s *lineSpout) NextTuple() {
	j := s.job
	if len(s.replay) > 0 {
		i := s.replay[0]
		s.replay = s.replay[1:]
		_ = s.Out.Emit(tuple.Values{int64(i), j.lines[i]}, i)
		return
	}
	if s.next < len(j.lines) {
		_ = s.Out.Emit(tuple.Values{int64(s.next), j.lines[s.next]}, s.next)
		s.next++
	}
}

func (s *lineSpout) Ack(id any) {
	j := s.job
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.acked[id.(int)] {
		return
	}
	j.acked[id.(int)] = true
	if n := len(j.acked); n%(len(j.lines)/10) == 0 {
		select {
		case j.progress <- n:
		default:
		}
	}
	if len(j.acked) == len(j.lines) {
		close(j.done)
	}
}

func (s *lineSpout) Fail(id any) {
	s.job.mu.Lock()
	s.job.replays++
	s.job.mu.Unlock()
	s.replay = append(s.replay, id.(int))
}

type splitBolt struct{ topology.BaseBasicBolt }

func (*splitBolt) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	id := t.Values()[0].(int64)
	for i, w := range strings.Fields(t.StringByField("line")) {
		if err := out.Emit(tuple.Values{w, id<<16 | int64(i)}); err != nil {
			return err
		}
	}
	return nil
}

type countBolt struct {
	topology.BaseBolt
	job  *wordJob
	task int
}

func (c *countBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	c.task = tc.TaskID
	return c.BaseBolt.Prepare(ctx, tc, out)
}

func (c *countBolt) Execute(t *tuple.Tuple) {
	j := c.job
	w, occ := t.StringByField("word"), t.Values()[1].(int64)
	j.mu.Lock()
	if task, ok := j.taskOf[w]; ok && task != c.task {
		j.misroute = append(j.misroute, fmt.Sprintf("%q to tasks %d and %d", w, task, c.task))
	}
	j.taskOf[w] = c.task
	if !j.seen[occ] {
		j.seen[occ] = true
		j.counts[w]++
	}
	j.mu.Unlock()
	c.Out.Ack(t)
}

// hostRun is one engine of a multi-process run: its connection and transport.
type hostRun struct {
	nc *nats.Conn
	tr *natstransport.Transport
	rt *engine.Runtime
}

// runWordCount runs j over three engines, each on its own connection to url and
// its own Transport, as three processes would, with the given message timeout;
// during (when not nil) is called with the acked count at each tenth of the lines
// until it returns true.
func runWordCount(t *testing.T, j *wordJob, url string, timeout time.Duration, during func(acked int) bool, opts ...natstransport.Option) []hostRun {
	t.Helper()
	topo := j.topology(t)
	cfg := topology.DefaultConfig()
	cfg.Ackers = 3
	cfg.MessageTimeout = timeout
	cfg.MaxSpoutPending = 1000
	cfg.Logger = slog.New(slog.DiscardHandler)
	assignments, err := engine.Spread(topo, cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	byComp, ackers := engine.TaskIDs(topo, cfg)
	tasks := len(ackers)
	for _, ids := range byComp {
		tasks += len(ids)
	}
	streams := codec.NewStreams(topo)
	prefix := newPrefix()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var hosts []hostRun
	for _, a := range assignments {
		nc := connect(t, url)
		tr, err := natstransport.New(nc, streams, append([]natstransport.Option{natstransport.WithPrefix(prefix),
			natstransport.WithEndpoints(natstransport.Endpoints(tasks, len(assignments)))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		rt, err := engine.Start(context.Background(), topo, cfg, engine.WithTransport(tr), engine.WithAssignment(a))
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, hostRun{nc: nc, tr: tr, rt: rt})
	}
	t.Cleanup(func() { // a failed test leaves no engine running
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, h := range hosts {
			_ = h.rt.Stop(ctx)
		}
	})
	for waiting := during != nil; ; {
		select {
		case <-j.done:
		case n := <-j.progress:
			if waiting && during(n) {
				waiting = false
			}
			continue
		case <-ctx.Done():
			j.mu.Lock()
			acked, replays := len(j.acked), j.replays
			j.mu.Unlock()
			t.Fatalf("%d of %d lines acked (%d replays) after 3 minutes", acked, len(j.lines), replays)
		}
		break
	}
	if err := hosts[1].rt.Stop(ctx); err != nil { // the stop travels to the other two
		t.Fatal(err)
	}
	for i, h := range hosts {
		select {
		case <-h.rt.Done():
		case <-ctx.Done():
			t.Fatalf("engine %d still running after host 2 stopped", i+1)
		}
	}
	return hosts
}

// checkCounts compares the job's counts with the reference, and reports what the
// engines and transports saw.
func checkCounts(t *testing.T, j *wordJob, hosts []hostRun) {
	t.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	want := j.reference()
	if !maps.Equal(j.counts, want) {
		var diff []string
		for w, n := range want {
			if j.counts[w] != n {
				diff = append(diff, fmt.Sprintf("%s: %d, want %d", w, j.counts[w], n))
			}
		}
		t.Fatalf("counts differ (%d words, want %d): %s", len(j.counts), len(want), strings.Join(diff, "; "))
	}
	if len(j.misroute) > 0 {
		t.Fatalf("fields grouping sent a word to two tasks: %s", strings.Join(j.misroute, "; "))
	}
	if len(j.acked) != len(j.lines) {
		t.Fatalf("%d of %d lines acked", len(j.acked), len(j.lines))
	}
	words := 0
	for _, n := range want {
		words += n
	}
	for i, h := range hosts {
		s := h.rt.Stats()
		if m := s.MisuseTotal(); m != 0 {
			t.Errorf("engine %d: %d misuse reports", i+1, m)
		}
		t.Logf("engine %d: transport %+v; engine's transport view %+v; reconnects %d", i+1, h.tr.Stats(), s.Transport, h.nc.Stats().Reconnects)
	}
	t.Logf("%d lines, %d words, %d distinct, %d replays", len(j.lines), words, len(want), j.replays)
}

// Word count over three engines, each with its own connection and transport on one
// server: the counts are exact, and nothing is lost on a healthy server.
func TestWordCountOverThreeProcesses(t *testing.T) {
	srv := runServer(t)
	j := newWordJob(3000)
	hosts := runWordCount(t, j, srv.ClientURL(), 30*time.Second, nil) // a replay here is a loss
	checkCounts(t, j, hosts)
	for i, h := range hosts {
		if s := h.tr.Stats(); s.Dropped != 0 {
			t.Errorf("engine %d's transport dropped %d messages on a healthy server", i+1, s.Dropped)
		}
	}
	if j.replays != 0 {
		t.Errorf("%d replays on a healthy server", j.replays)
	}
}

// With local delivery, the tasks of one engine talk without the server; the counts
// are as exact, and fewer messages cross NATS than are sent.
func TestWordCountOverThreeProcessesWithLocalDelivery(t *testing.T) {
	srv := runServer(t)
	j := newWordJob(3000)
	hosts := runWordCount(t, j, srv.ClientURL(), 30*time.Second, nil, natstransport.WithLocalDelivery())
	checkCounts(t, j, hosts)
	if j.replays != 0 {
		t.Errorf("%d replays on a healthy server", j.replays)
	}
	var sent, crossed uint64
	for _, h := range hosts {
		sent += h.tr.Stats().Sent
		crossed += h.nc.Stats().OutMsgs // published: frames and directory notices
	}
	if sent == 0 || crossed >= sent {
		t.Errorf("%d messages sent, %d crossed the server: local delivery kept none in the process", sent, crossed)
	}
	t.Logf("%d messages sent, %d crossed the server", sent, crossed)
}

// The server restarts on the same port mid-flow: whatever was in flight is lost, the
// connections reconnect and re-subscribe, and the protocol recovers the rest (credit
// and ends re-sent, lost trees replayed), so the flow ends with exact counts
// (STORM-3763).
func TestWordCountAcrossAServerRestart(t *testing.T) {
	srv := runServer(t)
	p := port(srv)
	j := newWordJob(3000)
	restarted := false
	hosts := runWordCount(t, j, srv.ClientURL(), 3*time.Second, func(acked int) bool {
		if acked < len(j.lines)/5 {
			return false
		}
		srv.Shutdown()
		srv.WaitForShutdown()
		runServer(t, func(o *server.Options) { o.Port = p })
		restarted = true
		t.Logf("server restarted with %d of %d lines acked", acked, len(j.lines))
		return true
	})
	if !restarted {
		t.Fatal("the flow ended before the server restarted")
	}
	checkCounts(t, j, hosts)
	for i, h := range hosts {
		if n := h.nc.Stats().Reconnects; n < 1 {
			t.Errorf("engine %d's connection reconnected %d times, want at least once", i+1, n)
		}
	}
}
