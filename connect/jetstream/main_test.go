package natsjs_test

import (
	"context"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/internal/leaktest"
	"github.com/gale-stream/gale/internal/natstest"
	"github.com/gale-stream/gale/pipelines/wordcount"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// newJS starts an embedded JetStream server and returns a JetStream context on it.
func newJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	s := natstest.Run(t, natstest.JetStream(t, ""))
	js, err := jetstream.New(natstest.Connect(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func mustStream(t *testing.T, js jetstream.JetStream, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	st, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: subjects})
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return st
}

// publish stores lines on subject, pipelined, and waits for every PubAck.
func publish(t *testing.T, js jetstream.JetStream, subject string, lines []string) {
	t.Helper()
	// In chunks well under the client's async limit (4000 pending), each waited
	// for: on a loaded machine the client refuses more than that once it stalls
	// ("too many outstanding async published messages").
	for len(lines) > 0 {
		n := min(len(lines), 1000)
		for _, l := range lines[:n] {
			if _, err := js.PublishAsync(subject, []byte(l)); err != nil {
				t.Fatal(err)
			}
		}
		lines = lines[n:]
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(30 * time.Second):
			t.Fatal("publishes not acknowledged in 30s")
		}
	}
}

// oneGoroutineCount counts the words of lines the plain way.
func oneGoroutineCount(lines []string) (map[string]int, int) {
	c := map[string]int{}
	n := 0
	for _, l := range lines {
		wordcount.Words(l, func(w string, _ int) { c[w]++; n++ })
	}
	return c, n
}

// split emits each word of the "line" field with the line's stream sequence and the
// word's offset: (word, seq, off). Lines holding "POISON" always fail.
type split struct {
	topology.BaseBasicBolt
	poisoned *counter
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) inc() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (s *split) Execute(t *tuple.Tuple, out topology.BasicCollector) error {
	line := t.StringByField("line")
	if strings.Contains(line, "POISON") {
		if s.poisoned != nil {
			s.poisoned.inc()
		}
		return errPoison
	}
	seq := t.ValueByField("seq").(uint64)
	var err error
	wordcount.Words(line, func(w string, off int) {
		if err == nil {
			err = out.Emit(tuple.Values{w, seq, off})
		}
	})
	return err
}

var errPoison = poisonErr{}

type poisonErr struct{}

func (poisonErr) Error() string { return "poison pill: this line always fails" }

// counts is the count bolts' shared state: each word occurrence (line sequence,
// offset) is applied once however often its line is replayed, as an idempotent sink.
type counts struct {
	mu      sync.Mutex
	seen    map[occ]bool
	words   map[string]int
	applied int
}

type occ struct {
	seq uint64
	off int
}

func newCounts() *counts { return &counts{seen: map[occ]bool{}, words: map[string]int{}} }

func (c *counts) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied
}

// count applies word occurrences, failing a seeded fraction of its inputs first.
type count struct {
	topology.BaseBolt
	c        *counts
	rng      *rand.Rand
	failRate float64
}

func (b *count) Execute(t *tuple.Tuple) {
	if b.rng.Float64() < b.failRate {
		_ = b.Out.Fail(t)
		return
	}
	o := occ{t.ValueByField("seq").(uint64), t.ValueByField("off").(int)}
	b.c.mu.Lock()
	if !b.c.seen[o] {
		b.c.seen[o] = true
		b.c.words[t.StringByField("word")]++
		b.c.applied++
	}
	b.c.mu.Unlock()
	_ = b.Out.Ack(t)
}

// wordCountTopology is JetStream spout -> split -> count.
func wordCountTopology(t *testing.T, src interface {
	Spout() topology.Spout
	Fields() []string
}, c *counts, failRate float64, seed int64, poisoned *counter) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder()
	b.SetSpout("lines", src.Spout, 1).Output(src.Fields()...)
	b.SetBasicBolt("split", func() topology.BasicBolt { return &split{poisoned: poisoned} }, 2).
		ShuffleGrouping("lines").Output("word", "seq", "off")
	var mu sync.Mutex
	task := int64(0)
	b.SetBolt("count", func() topology.Bolt {
		mu.Lock()
		defer mu.Unlock()
		task++
		return &count{c: c, rng: rand.New(rand.NewSource(seed + task)), failRate: failRate}
	}, 2).FieldsGrouping("split", "word")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func testConfig(timeout time.Duration) topology.Config {
	cfg := topology.DefaultConfig()
	cfg.MessageTimeout = timeout
	cfg.MaxSpoutPending = 500
	cfg.ShutdownTimeout = 10 * time.Second
	return cfg
}

func start(t *testing.T, ctx context.Context, topo *topology.Topology, cfg topology.Config) *engine.Runtime {
	t.Helper()
	rt, err := engine.Start(ctx, topo, cfg, engine.WithSerialization())
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func stop(t *testing.T, rt *engine.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
	<-rt.Done()
}

func consumerInfo(t *testing.T, js jetstream.JetStream, stream, durable string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// drained reports whether the consumer has nothing pending and nothing unacked.
func drained(t *testing.T, js jetstream.JetStream, stream, durable string) bool {
	info := consumerInfo(t, js, stream, durable)
	return info.NumAckPending == 0 && info.NumPending == 0
}

func checkCounts(t *testing.T, c *counts, want map[string]int, wantN int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.applied != wantN {
		t.Errorf("applied %d occurrences, want %d", c.applied, wantN)
	}
	if len(c.words) != len(want) {
		t.Errorf("%d distinct words, want %d", len(c.words), len(want))
	}
	bad := 0
	for w, n := range want {
		if c.words[w] != n && bad < 5 {
			t.Errorf("count[%q] = %d, want %d", w, c.words[w], n)
			bad++
		}
	}
}

func startErr(topo *topology.Topology, cfg topology.Config) (*engine.Runtime, error) {
	return engine.Start(context.Background(), topo, cfg, engine.WithSerialization())
}
