package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gale-stream/gale/component"
	natsjs "github.com/gale-stream/gale/connect/jetstream"
	"github.com/gale-stream/gale/connect/kafka"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

func kafkaSinkDecl() component.Declaration {
	return component.Declaration{
		Class: KafkaSinkClass,
		Doc:   "produces each input to a Kafka topic (connect/kafka): acked after the broker's ack, idempotent producer within a session, transactions as an option",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			snk, err := kafkaSinkOf(s)
			if err != nil {
				return nil, err
			}
			value, err := s.String("valueField", "value")
			if err != nil {
				return nil, err
			}
			newBolt := snk.Bolt()
			return func() topology.Bolt { return &kafkaSinkBolt{Bolt: newBolt(), value: value} }, nil
		},
	}
}

// kafkaSinkBolt is a gale.sink.Kafka task: kafka's, refusing at its start an
// input stream without the value field (RecordOf fails each such tuple, which a
// spout without a dead letter would replay for ever).
type kafkaSinkBolt struct {
	topology.Bolt
	value string
}

var _ topology.Drainer = (*kafkaSinkBolt)(nil)

func (b *kafkaSinkBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	if err := ioCheckInputs(tc, KafkaSinkClass, "valueField", []string{b.value}); err != nil {
		return err
	}
	return b.Bolt.Prepare(ctx, tc, out)
}

// Drain is kafka's sink's own (it flushes what it produced).
func (b *kafkaSinkBolt) Drain() {
	if d, ok := b.Bolt.(topology.Drainer); ok {
		d.Drain()
	}
}

func kafkaSinkOf(s component.Spec) (*kafka.Sink, error) {
	if err := s.Require("brokers", "topic"); err != nil {
		return nil, err
	}
	brokers, err := ioNonEmptyStrings(s, "brokers", "a seed broker (HOST:PORT)")
	if err != nil {
		return nil, err
	}
	topic, err := s.String("topic", "")
	if err != nil {
		return nil, err
	}
	if topic == "" {
		return nil, ioPropError("topic", "empty: want the topic to produce to")
	}
	keyField, err := s.String("keyField", "key")
	if err != nil {
		return nil, err
	}
	valueField, err := s.String("valueField", "value")
	if err != nil {
		return nil, err
	}
	switch {
	case valueField == "":
		return nil, ioPropError("valueField", "empty: want the field whose value is the record's value")
	case keyField == valueField:
		return nil, ioPropError("keyField", "%q is also valueField: the key and the value are two fields", keyField)
	}
	var opts []keyedOption[kafka.SinkOption]
	add := func(key string, o kafka.SinkOption) { opts = append(opts, keyedOption[kafka.SinkOption]{key, o}) }
	add("valueField", kafka.WithRecordFunc(RecordOf(keyField, valueField)))
	n, err := s.Int("maxInFlight", 1024)
	if err != nil {
		return nil, err
	}
	add("maxInFlight", kafka.WithMaxInFlight(n))
	hold, err := s.Duration("holdRefresh", 10*time.Second)
	if err != nil {
		return nil, err
	}
	if _, given := s.Properties["holdRefresh"]; given && !ioTopologyConfig(s).DisableTimeouts && hold >= ioTopologyConfig(s).MessageTimeout {
		// The connector's rule (WithHoldRefresh): else a broker outage times the
		// held inputs out, and their spout charges them with a failure.
		return nil, ioPropError("holdRefresh", "%v: at or above the message timeout (%v, topology.message.timeout.secs): a held input would time out before its refresh", hold, ioTopologyConfig(s).MessageTimeout)
	}
	add("holdRefresh", kafka.WithHoldRefresh(hold))
	txnID, err := s.String("transactionalId", "")
	if err != nil {
		return nil, err
	}
	_, hasEvery := s.Properties["transactionInterval"]
	every, err := s.Duration("transactionInterval", time.Second)
	if err != nil {
		return nil, err
	}
	switch {
	case txnID != "":
		add("transactionInterval", kafka.WithTransactions(txnID, every))
	case hasEvery:
		return nil, ioPropError("transactionInterval", "needs transactionalId: without it the sink is not transactional")
	}
	all := make([]kafka.SinkOption, len(opts))
	for i, o := range opts {
		if _, err := kafka.NewSink(brokers, topic, o.opt); err != nil {
			return nil, ioOptionError(o.key, err)
		}
		all[i] = o.opt
	}
	return kafka.NewSink(brokers, topic, all...)
}

// RecordOf is a kafka.RecordFunc taking the record's value from field valueField
// and its key from field keyField ("" or a missing field: no key). A []byte or
// string is taken as it is, nil is no bytes, anything else is written as JSON (a
// count 3 as "3"). An input without valueField is refused, naming the field.
func RecordOf(keyField, valueField string) kafka.RecordFunc {
	return func(t *tuple.Tuple) (*kgo.Record, error) {
		v, ok := t.Lookup(valueField)
		if !ok {
			return nil, fmt.Errorf("%w: a tuple from %s has no field %q (the value; it has %v)", kafka.ErrRecord, t.SourceComponent(), valueField, t.Fields())
		}
		value, err := recordBytes(v)
		if err != nil {
			return nil, fmt.Errorf("%w: field %q: %w", kafka.ErrRecord, valueField, err)
		}
		r := &kgo.Record{Value: value}
		if keyField != "" {
			if k, ok := t.Lookup(keyField); ok {
				if r.Key, err = recordBytes(k); err != nil {
					return nil, fmt.Errorf("%w: field %q: %w", kafka.ErrRecord, keyField, err)
				}
			}
		}
		return r, nil
	}
}

func recordBytes(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	case nil:
		return nil, nil
	}
	return json.Marshal(v)
}

func jetStreamSinkDecl() component.Declaration {
	return component.Declaration{
		Class: JetStreamSinkClass,
		Doc:   "publishes each input to a JetStream subject (connect/jetstream): acked after the PubAck, stored once per event id within the stream's duplicate window",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			snk, err := jetStreamSinkOf(s)
			if err != nil {
				return nil, err
			}
			return snk.Bolt, nil
		},
	}
}

func jetStreamSinkOf(s component.Spec) (*JetStreamSink, error) {
	if err := s.Require("url", "subject"); err != nil {
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
	subject, err := s.String("subject", "")
	if err != nil {
		return nil, err
	}
	var opts []keyedOption[natsjs.SinkOption]
	add := func(key string, o natsjs.SinkOption) { opts = append(opts, keyedOption[natsjs.SinkOption]{key, o}) }
	id, err := s.String("eventIdField", natsjs.DefaultEventIDField)
	if err != nil {
		return nil, err
	}
	add("eventIdField", natsjs.WithEventIDField(id))
	data, err := s.String("dataField", natsjs.DefaultDataField)
	if err != nil {
		return nil, err
	}
	add("dataField", natsjs.WithDataField(data))
	headers, err := s.Strings("headers", nil)
	if err != nil {
		return nil, err
	}
	for i, h := range headers {
		field, key, ok := strings.Cut(h, "=")
		if !ok {
			return nil, ioPropError("headers", "element %d (%q): want FIELD=Header-Key", i, h)
		}
		add("headers", natsjs.WithHeaderField(field, key))
	}
	n, err := s.Int("maxInFlight", natsjs.DefaultMaxInFlight)
	if err != nil {
		return nil, err
	}
	add("maxInFlight", natsjs.WithMaxInFlight(n))
	pt, err := s.Duration("publishTimeout", natsjs.DefaultPublishTimeout)
	if err != nil {
		return nil, err
	}
	add("publishTimeout", natsjs.WithPublishTimeout(pt))
	lo, hi, err := ioDurations(s, "retryBackoff", natsjs.DefaultRetryMin, "retryBackoffMax", natsjs.DefaultRetryMax)
	if err != nil {
		return nil, err
	}
	add("retryBackoff", natsjs.WithRetryBackoff(lo, hi))
	// The connector's rule (WithRetryBackoff): in an outage the held inputs'
	// timeouts are reset at each probe, a pause and a publish apart; at or past
	// the message timeout they time out, and their spout charges them (a
	// JetStream spout's maxAttempts then dead-letters events for an outage).
	_, givenPT := s.Properties["publishTimeout"]
	_, givenMax := s.Properties["retryBackoffMax"]
	if cfg := ioTopologyConfig(s); (givenPT || givenMax) && !cfg.DisableTimeouts && pt+hi >= cfg.MessageTimeout {
		key := "retryBackoffMax"
		if givenPT {
			key = "publishTimeout"
		}
		return nil, ioPropError(key, "publishTimeout %v + retryBackoffMax %v: at or above the message timeout (%v, topology.message.timeout.secs): held inputs would time out between two probes of an outage", pt, hi, cfg.MessageTimeout)
	}
	all := make([]natsjs.SinkOption, len(opts))
	for i, o := range opts {
		all[i] = o.opt
		if _, err := natsjs.NewSink(noJetStream{}, "x", o.opt); err != nil {
			return nil, ioOptionError(o.key, err)
		}
	}
	snk, err := NewJetStreamSink(u, subject, all...)
	if err != nil {
		if strings.Contains(err.Error(), "subject") {
			return nil, ioOptionError("subject", err)
		}
		return nil, ioOptionError("dataField", err) // the event id and the data are one field
	}
	return snk.WithNkeyFile(nkey), nil
}

// JetStreamSink is natsjs's sink (connect/jetstream) for a topology whose tasks
// connect to NATS themselves, as JetStreamSpout: each task connects to the URL (a
// reference is resolved in the process running the task) when it is prepared and
// closes the connection at its cleanup. It guarantees what natsjs.Sink does: an
// input is acked after its PubAck, and a replay with the same event id is dropped
// by the stream within its duplicate window.
type JetStreamSink struct {
	url     string
	nkey    string // the seed file the tasks authenticate with, or ""
	subject string
	opts    []natsjs.SinkOption
	fields  []string // what each input must carry (natsjs.Sink.InputFields)
}

// NewJetStreamSink checks its arguments as natsjs.NewSink does and refuses a URL
// holding credentials in clear.
func NewJetStreamSink(url, subject string, opts ...natsjs.SinkOption) (*JetStreamSink, error) {
	if err := checkNATSURL(url); err != nil {
		return nil, err
	}
	snk, err := natsjs.NewSink(noJetStream{}, subject, opts...)
	if err != nil {
		return nil, err
	}
	return &JetStreamSink{url: url, subject: subject, opts: append([]natsjs.SinkOption(nil), opts...), fields: snk.InputFields()}, nil
}

// WithNkeyFile makes each task authenticate with the nkey seed in file path, as
// JetStreamSpout's; it returns s.
func (s *JetStreamSink) WithNkeyFile(path string) *JetStreamSink {
	s.nkey = path
	return s
}

// Bolt returns a new task: the factory for Builder.SetBolt.
func (s *JetStreamSink) Bolt() topology.Bolt { return &jsSinkBolt{snk: s} }

type jsSinkBolt struct {
	snk   *JetStreamSink
	nc    *nats.Conn
	inner topology.Bolt
}

func (b *jsSinkBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	if err := ioCheckInputs(tc, JetStreamSinkClass, "field", b.snk.fields); err != nil {
		return err
	}
	nc, js, err := connectNATS(b.snk.url, b.snk.nkey, fmt.Sprintf("gale %s[%d]", tc.Component, tc.TaskIndex))
	if err != nil {
		return fmt.Errorf("%s: %w", JetStreamSinkClass, err)
	}
	snk, err := natsjs.NewSink(js, b.snk.subject, b.snk.opts...)
	if err == nil {
		b.inner = snk.Bolt()
		err = b.inner.Prepare(ctx, tc, out)
	}
	if err != nil {
		nc.Close()
		b.inner = nil
		return err
	}
	b.nc = nc
	return nil
}

func (b *jsSinkBolt) Execute(t *tuple.Tuple) { b.inner.Execute(t) }

func (b *jsSinkBolt) Cleanup() error {
	if b.inner == nil {
		return nil
	}
	err := b.inner.Cleanup() // stops its publisher first: the connection must still be up
	b.nc.Close()
	return err
}
