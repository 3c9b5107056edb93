package natsjs_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	natsjs "github.com/gale-stream/gale/connect/jetstream"
	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func lineFields() natsjs.SourceOption {
	return natsjs.WithFields(natsjs.TextField("line"), natsjs.SequenceField("seq"))
}

// A book's lines read from a stream, with 5% of the count bolt's inputs failed at
// random: the counts equal a one-goroutine count, and every message is acked once.
func TestWordCountFromStreamExact(t *testing.T) {
	js := newJS(t)
	mustStream(t, js, "BOOKS", "books.>")
	lines := testio.BookLines(t)
	publish(t, js, "books.scarlet", lines)
	want, wantN := oneGoroutineCount(lines)

	cfg := testConfig(5 * time.Second)
	src, err := natsjs.NewSource(js, "BOOKS", "wordcount", cfg, lineFields(),
		natsjs.WithMaxAttempts(1000), natsjs.WithBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c := newCounts()
	rt := start(t, context.Background(), wordCountTopology(t, src, c, 0.05, 1, nil), cfg)
	waitfor.True(t, 2*time.Minute, "every occurrence counted", func() bool { return c.total() == wantN })
	waitfor.True(t, 30*time.Second, "every message acked", func() bool { return drained(t, js, "BOOKS", "wordcount") })
	stop(t, rt)

	checkCounts(t, c, want, wantN)
	st := src.Stats()
	if st.Acked != uint64(len(lines)) {
		t.Errorf("acked %d messages, want each of the %d once", st.Acked, len(lines))
	}
	if st.Naked == 0 || st.Replays == 0 {
		t.Errorf("no failed tree was Nak'd and replayed (%+v): the 5%% failures did not happen", st)
	}
	if st.DeadLettered != 0 || st.AckErrors != 0 || st.Stale != 0 {
		t.Errorf("stats %+v: want no dead letters, ack errors or stale deliveries", st)
	}
	info := consumerInfo(t, js, "BOOKS", "wordcount")
	if info.AckFloor.Stream != uint64(len(lines)) || info.NumAckPending != 0 || info.NumPending != 0 {
		t.Errorf("consumer: ack floor %d (want %d), %d ack pending, %d pending",
			info.AckFloor.Stream, len(lines), info.NumAckPending, info.NumPending)
	}
	if info.Config.MaxAckPending != cfg.MaxSpoutPending || info.Config.AckWait != 2*cfg.MessageTimeout {
		t.Errorf("consumer MaxAckPending %d AckWait %v, want %d and %v", info.Config.MaxAckPending,
			info.Config.AckWait, cfg.MaxSpoutPending, 2*cfg.MessageTimeout)
	}
	t.Logf("%d lines, %d occurrences; %+v", len(lines), wantN, st)
}

// A line that always fails is tried exactly max attempts times, then dead-lettered
// with its last error and terminated; the other lines are counted.
func TestPoisonMessageDeadLettered(t *testing.T) {
	js := newJS(t)
	mustStream(t, js, "IN", "in.>")
	dlq := mustStream(t, js, "DLQ", "dlq.>")
	lines := []string{"the cat sat", "on the mat", "a POISON line", "the end"}
	publish(t, js, "in.lines", lines)
	good := []string{lines[0], lines[1], lines[3]}
	want, wantN := oneGoroutineCount(good)

	cfg := testConfig(2 * time.Second)
	const attempts = 3
	src, err := natsjs.NewSource(js, "IN", "poison", cfg, lineFields(), natsjs.WithMaxAttempts(attempts),
		natsjs.WithBackoff(5*time.Millisecond, 20*time.Millisecond), natsjs.WithDeadLetter("dlq.lines"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCounts()
	var poisoned counter
	rt := start(t, context.Background(), wordCountTopology(t, src, c, 0, 1, &poisoned), cfg)
	waitfor.True(t, 30*time.Second, "a dead letter", func() bool { return src.Stats().DeadLettered == 1 })
	waitfor.True(t, 30*time.Second, "every message settled", func() bool { return drained(t, js, "IN", "poison") })
	stop(t, rt)

	checkCounts(t, c, want, wantN)
	if n := poisoned.get(); n != attempts {
		t.Errorf("the poison line was processed %d times, want exactly %d", n, attempts)
	}
	st := src.Stats()
	if st.Naked != attempts-1 || st.Acked != 3 {
		t.Errorf("stats %+v: want %d naks and 3 acks", st, attempts-1)
	}
	m, err := dlq.GetLastMsgForSubject(context.Background(), "dlq.lines")
	if err != nil {
		t.Fatalf("dead letter: %v", err)
	}
	h := m.Header
	if string(m.Data) != "a POISON line" || h.Get(natsjs.HeaderSubject) != "in.lines" ||
		h.Get(natsjs.HeaderSequence) != "3" || h.Get(natsjs.HeaderAttempts) != strconv.Itoa(attempts) ||
		h.Get(natsjs.HeaderStream) != "IN" || !strings.Contains(h.Get(natsjs.HeaderError), errPoison.Error()) {
		t.Errorf("dead letter %q with headers %v", m.Data, h)
	}
	info, err := dlq.Info(context.Background())
	if err != nil || info.State.Msgs != 1 {
		t.Errorf("dead-letter stream holds %v messages (%v), want 1", info.State.Msgs, err)
	}
	// Term'd: the server will not deliver it again.
	ci := consumerInfo(t, js, "IN", "poison")
	if ci.AckFloor.Stream != uint64(len(lines)) {
		t.Errorf("ack floor %d, want %d (the poison message terminated)", ci.AckFloor.Stream, len(lines))
	}
}

// The spout's topology hard-stopped mid-run (its worker lost) and a new spout started
// on the same durable (the next generation elsewhere): nothing lost, counts exact.
func TestSpoutMovedResumesFromDurable(t *testing.T) {
	js := newJS(t)
	mustStream(t, js, "BOOKS", "books.>")
	lines := testio.BookLines(t)
	publish(t, js, "books.scarlet", lines)
	want, wantN := oneGoroutineCount(lines)
	cfg := testConfig(5 * time.Second)
	cfg.MaxSpoutPending = 200
	c := newCounts()

	newSrc := func() *natsjs.Source {
		src, err := natsjs.NewSource(js, "BOOKS", "moved", cfg, lineFields(),
			natsjs.WithMaxAttempts(1000), natsjs.WithBackoff(time.Millisecond, 20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	first := newSrc()
	ctx, cancel := context.WithCancel(context.Background())
	rt := start(t, ctx, wordCountTopology(t, first, c, 0.05, 7, nil), cfg)
	waitfor.True(t, time.Minute, "a third of the occurrences", func() bool { return c.total() >= wantN/3 })
	cancel() // a hard stop: trees in flight abandoned, as when a worker is lost
	<-rt.Done()
	if got := c.total(); got >= wantN {
		t.Fatalf("the first spout finished the book (%d occurrences) before its stop", got)
	}
	info := consumerInfo(t, js, "BOOKS", "moved")
	t.Logf("stopped after %d of %d occurrences; consumer: ack floor %d, %d ack pending; first spout %+v",
		c.total(), wantN, info.AckFloor.Stream, info.NumAckPending, first.Stats())

	second := newSrc()
	rt = start(t, context.Background(), wordCountTopology(t, second, c, 0.05, 8, nil), cfg)
	waitfor.True(t, 2*time.Minute, "every occurrence counted", func() bool { return c.total() == wantN })
	waitfor.True(t, 30*time.Second, "every message acked", func() bool { return drained(t, js, "BOOKS", "moved") })
	stop(t, rt)
	checkCounts(t, c, want, wantN)
	if a := first.Stats().Acked + second.Stats().Acked; a < uint64(len(lines)) {
		t.Errorf("%d acks over both spouts, want at least %d", a, len(lines))
	}
	t.Logf("second spout %+v", second.Stats())
}

// holder keeps each input past the consumer's AckWait, resetting its tree's timeout,
// then acks it: the spout's InProgress keeps the server from redelivering it.
type holder struct {
	topology.BaseBolt
	hold, every time.Duration
	done        *counter
}

func (h *holder) Execute(t *tuple.Tuple) {
	// The hold is wall time by nature: it must outlast the server's AckWait.
	for end := time.Now().Add(h.hold); time.Now().Before(end); time.Sleep(h.every) {
		_ = h.Out.ResetTimeout(t)
	}
	_ = h.Out.Ack(t)
	h.done.inc()
}

func TestInProgressKeepsSlowTreeFromRedelivery(t *testing.T) {
	js := newJS(t)
	mustStream(t, js, "SLOW", "slow")
	publish(t, js, "slow", []string{"one", "two"})
	cfg := testConfig(200 * time.Millisecond) // AckWait 400 ms
	src, err := natsjs.NewSource(js, "SLOW", "slow", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var done counter
	b := topology.NewBuilder()
	b.SetSpout("in", src.Spout, 1).Output(src.Fields()...)
	b.SetBolt("hold", func() topology.Bolt {
		return &holder{hold: 1200 * time.Millisecond, every: 50 * time.Millisecond, done: &done}
	}, 2).ShuffleGrouping("in")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	rt := start(t, context.Background(), topo, cfg)
	waitfor.True(t, 20*time.Second, "both held trees acked", func() bool { return done.get() == 2 })
	waitfor.True(t, 10*time.Second, "both messages acked", func() bool { return drained(t, js, "SLOW", "slow") })
	stop(t, rt)
	st := src.Stats()
	if st.InProgress == 0 || st.Resets < 2 || st.Replays != 0 || st.Merged != 0 || st.Acked != 2 || st.Naked != 0 {
		t.Errorf("stats %+v: want InProgress sent (at least one per tree for the bolt's ResetTimeout), no redelivery, 2 acks", st)
	}
}

// Misuse: each bad argument or option is refused with an error that names it.
func TestSourceMisuse(t *testing.T) {
	js := newJS(t)
	cfg := testConfig(10 * time.Second)
	noAckers := cfg
	noAckers.Ackers = 0
	unlimited := cfg
	unlimited.MaxSpoutPending = 0
	badTimeout := cfg
	badTimeout.MessageTimeout = 0
	for _, tc := range []struct {
		name    string
		js      jetstream.JetStream
		stream  string
		durable string
		cfg     topology.Config
		opts    []natsjs.SourceOption
		want    string
		is      error
	}{
		{"nil js", nil, "S", "d", cfg, nil, "nil JetStream", natsjs.ErrOption},
		{"no stream", js, "", "d", cfg, nil, "empty stream name", natsjs.ErrOption},
		{"dotted stream", js, "a.b", "d", cfg, nil, `stream name "a.b"`, natsjs.ErrOption},
		{"no durable", js, "S", "", cfg, nil, "empty durable", natsjs.ErrOption},
		{"wild durable", js, "S", "d*", cfg, nil, `durable name "d*"`, natsjs.ErrOption},
		{"no ackers", js, "S", "d", noAckers, nil, "Ackers = 0", natsjs.ErrOption},
		{"unlimited pending", js, "S", "d", unlimited, nil, "MaxSpoutPending = 0", natsjs.ErrOption},
		{"bad config", js, "S", "d", badTimeout, nil, "MessageTimeout = 0s", topology.ErrConfig},
		{"short AckWait", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithAckWait(12 * time.Second)},
			"AckWait 12s < 1.25 × MessageTimeout 10s", natsjs.ErrAckWait},
		{"zero AckWait", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithAckWait(0)}, "WithAckWait(0s)", natsjs.ErrOption},
		{"attempts", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithMaxAttempts(0)}, "WithMaxAttempts(0)", natsjs.ErrOption},
		{"backoff", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithBackoff(time.Second, time.Millisecond)}, "WithBackoff(1s, 1ms)", natsjs.ErrOption},
		{"dead letter", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithDeadLetter("dlq.>")}, `WithDeadLetter("dlq.>")`, natsjs.ErrOption},
		{"no fields", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithFields()}, "at least one field", natsjs.ErrOption},
		{"twice", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithFields(natsjs.DataField("x"), natsjs.TextField("x"))}, `field "x" twice`, natsjs.ErrOption},
		{"header", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithFields(natsjs.HeaderField("h", ""))}, `HeaderField "h" has no header key`, natsjs.ErrOption},
		{"fetch", js, "S", "d", cfg, []natsjs.SourceOption{natsjs.WithFetch(0, time.Second)}, "WithFetch(0, 1s)", natsjs.ErrOption},
		{"nil option", js, "S", "d", cfg, []natsjs.SourceOption{nil}, "nil option", natsjs.ErrOption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := natsjs.NewSource(tc.js, tc.stream, tc.durable, tc.cfg, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) || !errors.Is(err, natsjs.ErrOption) {
				t.Errorf("error %v, want one containing %q, matching %v and ErrOption", err, tc.want, tc.is)
			}
		})
	}
}

// Open refuses a stream that does not exist and a dead-letter subject no stream
// captures: engine.Start returns the error.
func TestSourceOpenErrors(t *testing.T) {
	js := newJS(t)
	cfg := testConfig(time.Second)
	for _, tc := range []struct {
		name, stream string
		opts         []natsjs.SourceOption
		want         string
		is           error
	}{
		{"missing stream", "NOPE", nil, `durable consumer "d" on stream "NOPE"`, jetstream.ErrStreamNotFound},
		{"dead letter uncaptured", "S", []natsjs.SourceOption{natsjs.WithDeadLetter("nowhere")}, `dead-letter subject "nowhere"`, natsjs.ErrNoStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.stream == "S" {
				mustStream(t, js, "S", "s")
			}
			src, err := natsjs.NewSource(js, tc.stream, "d", cfg, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			b := topology.NewBuilder()
			b.SetSpout("in", src.Spout, 1).Output(src.Fields()...)
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			rt, err := startErr(topo, cfg)
			if err == nil {
				stop(t, rt)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, tc.is) {
				t.Errorf("Start: %v, want an error containing %q matching %v", err, tc.want, tc.is)
			}
		})
	}
}
