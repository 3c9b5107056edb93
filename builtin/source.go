package builtin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/component"
	natsjs "github.com/gale-stream/gale/connect/jetstream"
	"github.com/gale-stream/gale/connect/kafka"
	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/topology"
)

// keyedOption is a connector option and the property it came from, so that the
// connector's own check of it is reported at that property.
type keyedOption[O any] struct {
	key string
	opt O
}

func kafkaSpoutDecl() component.Declaration {
	return component.Declaration{
		Class: KafkaSpoutClass,
		Doc:   "reads Kafka topics as a consumer group (connect/kafka): at least once, commits only the acked prefix, dead-letter topic after maxAttempts",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			src, err := kafkaSourceOf(s)
			if err != nil {
				return nil, err
			}
			return src.Spout(), nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: kafka.SpoutFields}}, nil
		},
	}
}

// kafkaSourceOf makes the kafka.Source a gale.spout.Kafka spec describes.
func kafkaSourceOf(s component.Spec) (*kafka.Source, error) {
	if err := s.Require("brokers", "group", "topics"); err != nil {
		return nil, err
	}
	brokers, err := ioNonEmptyStrings(s, "brokers", "a seed broker (HOST:PORT)")
	if err != nil {
		return nil, err
	}
	group, err := s.String("group", "")
	if err != nil {
		return nil, err
	}
	if group == "" {
		return nil, ioPropError("group", "empty: the spout commits its offsets as a consumer group, name it")
	}
	topics, err := ioNonEmptyStrings(s, "topics", "a topic")
	if err != nil {
		return nil, err
	}
	var opts []keyedOption[kafka.SourceOption]
	add := func(key string, o kafka.SourceOption) { opts = append(opts, keyedOption[kafka.SourceOption]{key, o}) }

	reset, err := s.String("offsetReset", "earliest")
	if err != nil {
		return nil, err
	}
	switch reset {
	case "earliest":
		add("offsetReset", kafka.WithOffsetReset(kafka.Earliest))
	case "latest":
		add("offsetReset", kafka.WithOffsetReset(kafka.Latest))
	default:
		return nil, ioPropError("offsetReset", "want earliest or latest (auto.offset.reset), not %q", reset)
	}
	rc, err := s.Bool("readCommitted", false)
	if err != nil {
		return nil, err
	}
	if rc {
		add("readCommitted", kafka.WithReadCommitted())
	}
	dlt, err := s.String("deadLetterTopic", "")
	if err != nil {
		return nil, err
	}
	_, hasAttempts := s.Properties["maxAttempts"]
	attempts, err := s.Int("maxAttempts", natsjs.DefaultMaxAttempts)
	if err != nil {
		return nil, err
	}
	switch {
	case dlt != "" && attempts < 1:
		return nil, ioPropError("maxAttempts", "%d: want at least 1 (the emits a record gets before its dead letter)", attempts)
	case dlt != "":
		add("deadLetterTopic", kafka.WithDeadLetter(dlt, attempts))
	case hasAttempts:
		return nil, ioPropError("maxAttempts", "needs deadLetterTopic: without a dead-letter topic a record is replayed until its tree completes")
	}
	first, last, err := ioDurations(s, "retryBackoff", 10*time.Millisecond, "retryBackoffMax", 5*time.Second)
	if err != nil {
		return nil, err
	}
	add("retryBackoff", kafka.WithRetryBackoff(first, last))
	for _, d := range []struct {
		key string
		def time.Duration
		opt func(time.Duration) kafka.SourceOption
	}{
		{"commitInterval", time.Second, kafka.WithCommitInterval},
		{"revokeWait", 10 * time.Second, kafka.WithRevokeWait},
	} {
		v, err := s.Duration(d.key, d.def)
		if err != nil {
			return nil, err
		}
		add(d.key, d.opt(v))
	}
	mb, err := s.Int("maxBuffered", 1024)
	if err != nil {
		return nil, err
	}
	add("maxBuffered", kafka.WithMaxBuffered(mb))

	all := make([]kafka.SourceOption, len(opts))
	for i, o := range opts {
		if _, err := kafka.NewSource(brokers, group, topics, o.opt); err != nil {
			return nil, ioOptionError(o.key, err)
		}
		all[i] = o.opt
	}
	src, err := kafka.NewSource(brokers, group, topics, all...)
	if err != nil {
		// What no single option shows: the dead-letter topic is also read.
		return nil, ioOptionError("deadLetterTopic", err)
	}
	return src, nil
}

// ioNonEmptyStrings reads a list property that must hold at least one non-empty string.
func ioNonEmptyStrings(s component.Spec, key, what string) ([]string, error) {
	l, err := s.Strings(key, nil)
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, ioPropError(key, "an empty list: want at least %s", what)
	}
	for i, v := range l {
		if strings.TrimSpace(v) == "" {
			return nil, ioPropError(key, "element %d is empty: want %s", i, what)
		}
	}
	return l, nil
}

func jetStreamSpoutDecl() component.Declaration {
	return component.Declaration{
		Class: JetStreamSpoutClass,
		Doc:   "reads a JetStream stream through a durable pull consumer (connect/jetstream): at least once, Nak with backoff, dead letter after maxAttempts",
		Spout: func(s component.Spec) (func() topology.Spout, error) {
			src, err := jetStreamSpoutOf(s)
			if err != nil {
				return nil, err
			}
			return src.Spout, nil
		},
		Outputs: func(s component.Spec) ([]component.Output, error) {
			fields, err := s.Strings("fields", nil)
			if err != nil {
				return nil, err
			}
			fs, err := jsFields(fields)
			if err != nil {
				return nil, ioPropError("fields", "%v", err)
			}
			names := make([]string, len(fs))
			for i, f := range fs {
				names[i] = f.Name()
			}
			return []component.Output{{Fields: names}}, nil
		},
	}
}

// jsFields reads a fields list: each "NAME=PART" or "PART" (named as the part),
// PART one of subject, data, text, seq, delivered, header:KEY. None: natsjs's
// DefaultFields.
func jsFields(list []string) ([]natsjs.Field, error) {
	if list == nil {
		return natsjs.DefaultFields(), nil
	}
	if len(list) == 0 {
		return nil, errors.New("an empty list: want at least one field (or leave it out for subject, data, seq)")
	}
	out := make([]natsjs.Field, 0, len(list))
	for i, e := range list {
		name, part, ok := strings.Cut(e, "=")
		if !ok {
			name, part = e, e
			if k, ok := strings.CutPrefix(e, "header:"); ok {
				name = k
			}
		}
		if name == "" {
			return nil, fmt.Errorf("element %d (%q) has no field name", i, e)
		}
		switch {
		case part == "subject":
			out = append(out, natsjs.SubjectField(name))
		case part == "data":
			out = append(out, natsjs.DataField(name))
		case part == "text":
			out = append(out, natsjs.TextField(name))
		case part == "seq":
			out = append(out, natsjs.SequenceField(name))
		case part == "delivered":
			out = append(out, natsjs.DeliveredField(name))
		case strings.HasPrefix(part, "header:") && len(part) > len("header:"):
			out = append(out, natsjs.HeaderField(name, strings.TrimPrefix(part, "header:")))
		default:
			return nil, fmt.Errorf("element %d (%q): part %q is none of subject, data, text, seq, delivered, header:KEY", i, e, part)
		}
	}
	return out, nil
}

// jetStreamSpoutOf makes the JetStreamSpout a gale.spout.JetStream spec describes.
func jetStreamSpoutOf(s component.Spec) (*JetStreamSpout, error) {
	if err := s.Require("url", "stream", "durable"); err != nil {
		return nil, err
	}
	u, err := natsURL(s, "url")
	if err != nil {
		return nil, err
	}
	nkey, err := s.String("nkey", "")
	if err != nil {
		return nil, err
	}
	stream, err := s.String("stream", "")
	if err != nil {
		return nil, err
	}
	durable, err := s.String("durable", "")
	if err != nil {
		return nil, err
	}
	var opts []keyedOption[natsjs.SourceOption]
	add := func(key string, o natsjs.SourceOption) {
		opts = append(opts, keyedOption[natsjs.SourceOption]{key, o})
	}
	fields, err := s.Strings("fields", nil)
	if err != nil {
		return nil, err
	}
	fs, err := jsFields(fields)
	if err != nil {
		return nil, ioPropError("fields", "%v", err)
	}
	add("fields", natsjs.WithFields(fs...))
	if filters, err := s.Strings("filterSubjects", nil); err != nil {
		return nil, err
	} else if filters != nil {
		add("filterSubjects", natsjs.WithFilterSubjects(filters...))
	}
	n, err := s.Int("maxAttempts", natsjs.DefaultMaxAttempts)
	if err != nil {
		return nil, err
	}
	add("maxAttempts", natsjs.WithMaxAttempts(n))
	if dl, err := s.String("deadLetter", ""); err != nil {
		return nil, err
	} else if _, ok := s.Properties["deadLetter"]; ok {
		add("deadLetter", natsjs.WithDeadLetter(dl))
	}
	lo, hi, err := ioDurations(s, "backoff", natsjs.DefaultBackoffMin, "backoffMax", natsjs.DefaultBackoffMax)
	if err != nil {
		return nil, err
	}
	add("backoff", natsjs.WithBackoff(lo, hi))
	if _, ok := s.Properties["ackWait"]; ok {
		d, err := s.Duration("ackWait", 0)
		if err != nil {
			return nil, err
		}
		add("ackWait", natsjs.WithAckWait(d))
	}
	batch, err := s.Int("fetchBatch", natsjs.DefaultFetchBatch)
	if err != nil {
		return nil, err
	}
	wait, err := s.Duration("fetchWait", natsjs.DefaultFetchWait)
	if err != nil {
		return nil, err
	}
	if _, given := s.Properties["fetchBatch"]; given && ioTopologyConfig(s).MaxSpoutPending > 0 && batch > ioTopologyConfig(s).MaxSpoutPending {
		// A task holds at most max spout pending messages: a larger fetch only waits
		// in memory, and its buffer is allocated whole when the task opens (a
		// fetchBatch of 2^40 panicked there, 10^8 took 4 GB).
		return nil, ioPropError("fetchBatch", "%d: above topology.max.spout.pending (%d), the messages a task may hold: want at most that", batch, ioTopologyConfig(s).MaxSpoutPending)
	}
	fetchKey := "fetchBatch"
	if batch >= 1 {
		fetchKey = "fetchWait" // then the wait is what WithFetch would refuse
	}
	add(fetchKey, natsjs.WithFetch(batch, wait))

	// The stream, the durable and the topology's config first, then each option
	// alone: an error is placed at what caused it.
	cfg := ioTopologyConfig(s)
	if _, err := natsjs.NewSource(noJetStream{}, stream, durable, cfg); err != nil {
		switch {
		case strings.Contains(err.Error(), "stream name"):
			return nil, ioOptionError("stream", err)
		case strings.Contains(err.Error(), "durable"):
			return nil, ioOptionError("durable", err)
		}
		// Message timeout, ackers, max spout pending: the config: section's.
		return nil, &component.SpecError{Arg: -1, Call: -1, Msg: "the topology's config: " + err.Error()}
	}
	all := make([]natsjs.SourceOption, len(opts))
	for i, o := range opts {
		if _, err := natsjs.NewSource(noJetStream{}, stream, durable, cfg, o.opt); err != nil {
			if errors.Is(err, natsjs.ErrAckWait) {
				return nil, ioOptionError("ackWait", err)
			}
			return nil, ioOptionError(o.key, err)
		}
		all[i] = o.opt
	}
	src, err := NewJetStreamSpout(u, stream, durable, cfg, all...)
	if err != nil {
		return nil, &component.SpecError{Arg: -1, Call: -1, Msg: err.Error()}
	}
	return src.WithNkeyFile(nkey), nil
}

// noJetStream stands for the connection when a JetStreamSpout or JetStreamSink is
// checked at build: natsjs's checks need a non-nil one and use nothing of it. Each
// task connects to the real server when it starts.
type noJetStream struct{ jetstream.JetStream }

// JetStreamSpout is natsjs's spout (connect/jetstream) for a topology whose tasks
// connect to NATS themselves: each task opens its own connection to the URL when it
// opens (a reference, env:NAME or @PATH, is resolved then, in the process running
// the task) and closes it when it closes. It guarantees what natsjs.Source does: at
// least once from a durable pull consumer, resumed by a moved task.
//
//	src, err := builtin.NewJetStreamSpout("nats://127.0.0.1:4222", "LINES", "wc", cfg)
//	b.SetSpout("lines", src.Spout, 1).Output(src.Fields()...)
type JetStreamSpout struct {
	url             string
	nkey            string // the seed file the tasks authenticate with, or ""
	stream, durable string
	cfg             topology.Config
	opts            []natsjs.SourceOption
	fields          []string
}

// NewJetStreamSpout checks its arguments as natsjs.NewSource does (cfg is the
// topology's: its message timeout and max spout pending set the consumer's AckWait
// and MaxAckPending) and refuses a URL holding credentials in clear.
func NewJetStreamSpout(url, stream, durable string, cfg topology.Config, opts ...natsjs.SourceOption) (*JetStreamSpout, error) {
	if err := checkNATSURL(url); err != nil {
		return nil, err
	}
	src, err := natsjs.NewSource(noJetStream{}, stream, durable, cfg, opts...)
	if err != nil {
		return nil, err
	}
	return &JetStreamSpout{url: url, stream: stream, durable: durable, cfg: cfg,
		opts: append([]natsjs.SourceOption(nil), opts...), fields: src.Fields()}, nil
}

// Fields are the emitted tuples' fields, for Output.
func (s *JetStreamSpout) Fields() []string { return append([]string(nil), s.fields...) }

// WithNkeyFile makes each task authenticate with the nkey seed in file path (as
// gale nats asks: the gale.nk in its data directory), read when the task opens;
// "" for none. It returns s; call it before the topology starts.
func (s *JetStreamSpout) WithNkeyFile(path string) *JetStreamSpout {
	s.nkey = path
	return s
}

// Spout returns a new task: the factory for Builder.SetSpout.
func (s *JetStreamSpout) Spout() topology.Spout { return &jsSpout{src: s} }

// jsSpout is one task: natsjs's spout on the task's own connection.
type jsSpout struct {
	src   *JetStreamSpout
	nc    *nats.Conn
	inner topology.Spout
}

var (
	_ topology.ReasonedSpout     = (*jsSpout)(nil)
	_ topology.TimeoutResetSpout = (*jsSpout)(nil)
)

// connectNATS opens a connection to u (a reference is resolved here) that
// reconnects for ever: an outage is natsjs's to ride out, not a reason to close.
func connectNATS(u, nkey, name string) (*nats.Conn, jetstream.JetStream, error) {
	resolved, err := sink.ResolveURL(u)
	if err != nil {
		return nil, nil, err
	}
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	if nkey != "" {
		// gale nats lets in only the holder of its key (gale.nk in its data
		// directory): the seed file stays on the worker, only its path travels.
		o, err := nats.NkeyOptionFromSeed(nkey)
		if err != nil {
			return nil, nil, fmt.Errorf("nkey %s: %w", nkey, err)
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(resolved, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS at %s: %w", redactNATS(resolved), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("JetStream at %s: %w", redactNATS(resolved), err)
	}
	return nc, js, nil
}

func (s *jsSpout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	nc, js, err := connectNATS(s.src.url, s.src.nkey, fmt.Sprintf("gale %s[%d]", tc.Component, tc.TaskIndex))
	if err != nil {
		return fmt.Errorf("%s: %w", JetStreamSpoutClass, err)
	}
	src, err := natsjs.NewSource(js, s.src.stream, s.src.durable, s.src.cfg, s.src.opts...)
	if err != nil {
		nc.Close()
		return err
	}
	inner := src.Spout()
	if err := inner.Open(ctx, tc, out); err != nil {
		nc.Close()
		return err
	}
	s.nc, s.inner = nc, inner
	return nil
}

func (s *jsSpout) NextTuple()  { s.inner.NextTuple() }
func (s *jsSpout) Ack(id any)  { s.inner.Ack(id) }
func (s *jsSpout) Fail(id any) { s.inner.Fail(id) }
func (s *jsSpout) FailReason(id any, reason string) {
	s.inner.(topology.ReasonedSpout).FailReason(id, reason)
}
func (s *jsSpout) TimeoutReset(id any) { s.inner.(topology.TimeoutResetSpout).TimeoutReset(id) }
func (s *jsSpout) Close() error {
	if s.inner == nil {
		return nil
	}
	err := s.inner.Close() // Naks what it held: the connection must still be up
	s.nc.Close()
	return err
}
