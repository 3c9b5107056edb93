package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// RecordFunc makes the Kafka record of a sink input. An error fails the input (the
// event's fault, charged to it).
type RecordFunc func(t *tuple.Tuple) (*kgo.Record, error)

type sinkConfig struct {
	brokers     []string
	topic       string
	record      RecordFunc
	maxInFlight int
	txnID       string
	txnEvery    time.Duration
	resetAfter  time.Duration
	logger      *slog.Logger
	kgoOpts     []kgo.Opt
}

// SinkOption configures NewSink.
type SinkOption func(*sinkConfig) error

// WithRecordFunc sets how an input becomes a record. Default: field "value"
// ([]byte or string) is the value, field "key" (same types, optional) the key.
func WithRecordFunc(fn RecordFunc) SinkOption {
	return func(c *sinkConfig) error {
		if fn == nil {
			return fmt.Errorf("%w: nil record func", ErrOption)
		}
		c.record = fn
		return nil
	}
}

// WithMaxInFlight bounds the inputs a sink task has produced and not yet seen
// acknowledged; Execute waits for room (backpressure). Default 1024.
func WithMaxInFlight(n int) SinkOption {
	return func(c *sinkConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: max in flight %d, must be >= 1", ErrOption, n)
		}
		c.maxInFlight = n
		return nil
	}
}

// WithTransactions makes each sink task a transactional producer with id
// transactionalID-<task index>: inputs are produced in a transaction committed
// every interval (and on Drain), and acked once it commits; a transaction that
// fails (a produce, or the commit) is aborted and fails its inputs. What this does
// and does not guarantee is in the package doc.
func WithTransactions(transactionalID string, interval time.Duration) SinkOption {
	return func(c *sinkConfig) error {
		if transactionalID == "" {
			return fmt.Errorf("%w: empty transactional id", ErrOption)
		}
		if interval <= 0 {
			return fmt.Errorf("%w: transaction interval %v, must be > 0", ErrOption, interval)
		}
		c.txnID, c.txnEvery = transactionalID, interval
		return nil
	}
}

// WithHoldRefresh sets how long an input may wait for its produce before the sink
// restarts its tree's message timeout (OutputCollector.ResetTimeout), and again
// each such period: a broker outage holds inputs, retried by kgo, without the
// spout failing them. Set it below the topology's MessageTimeout. Default 10 s;
// 0 turns it off.
func WithHoldRefresh(d time.Duration) SinkOption {
	return func(c *sinkConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: hold refresh %v, must be >= 0", ErrOption, d)
		}
		c.resetAfter = d
		return nil
	}
}

// WithSinkLogger sets the logger. Default: the task's logger.
func WithSinkLogger(l *slog.Logger) SinkOption {
	return func(c *sinkConfig) error { c.logger = l; return nil }
}

// WithSinkKgoOptions adds options to every sink task's kgo client. The seed
// brokers, default topic and transactional id are applied after them and win.
func WithSinkKgoOptions(opts ...kgo.Opt) SinkOption {
	return func(c *sinkConfig) error { c.kgoOpts = append(c.kgoOpts, opts...); return nil }
}

// Sink writes its inputs to a Kafka topic with the idempotent producer, acking each
// input once the broker acknowledged its record.
type Sink struct{ cfg sinkConfig }

// NewSink returns a sink writing to topic (a RecordFunc may set another topic per
// record).
func NewSink(brokers []string, topic string, opts ...SinkOption) (*Sink, error) {
	c := sinkConfig{brokers: brokers, topic: topic, record: defaultRecord, maxInFlight: 1024, resetAfter: 10 * time.Second}
	switch {
	case len(brokers) == 0:
		return nil, fmt.Errorf("%w: no seed brokers", ErrOption)
	case topic == "":
		return nil, fmt.Errorf("%w: empty topic", ErrOption)
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: a nil option", ErrOption)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	return &Sink{cfg: c}, nil
}

// Bolt returns the factory of the sink bolt.
func (s *Sink) Bolt() func() topology.Bolt {
	return func() topology.Bolt { return &sinkBolt{cfg: &s.cfg} }
}

// ErrRecord marks an input the default RecordFunc cannot make a record of.
var ErrRecord = errors.New("kafka sink: input is not a record")

func defaultRecord(t *tuple.Tuple) (*kgo.Record, error) {
	bytesOf := func(name string, required bool) ([]byte, error) {
		v, ok := t.Lookup(name)
		if !ok {
			if required {
				return nil, fmt.Errorf("%w: a tuple from %s has no field %q", ErrRecord, t.SourceComponent(), name)
			}
			return nil, nil
		}
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		case nil:
			return nil, nil
		}
		return nil, fmt.Errorf("%w: field %q of a tuple from %s is %T, want []byte or string", ErrRecord, name, t.SourceComponent(), v)
	}
	value, err := bytesOf("value", true)
	if err != nil {
		return nil, err
	}
	key, err := bytesOf("key", false)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Key: key, Value: value}, nil
}

// sinkBolt is one task. Produce promises run on kgo's goroutines and ack or fail
// through the collector, which is safe for concurrent use. The refresher goroutine
// (and, with transactions, the committer) is stopped by Cleanup.
type sinkBolt struct {
	cfg    *sinkConfig
	out    topology.OutputCollector
	log    *slog.Logger
	cl     *kgo.Client
	sem    chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	held    map[*tuple.Tuple]time.Time // produced, not yet acknowledged: since when
	txnMu   sync.Mutex                 // transactions: produce vs end
	txnOpen bool
	txnIns  []*tuple.Tuple // inputs of the open transaction
	txnErr  error          // the first produce error of the open transaction
	txnLeft bool           // kgo still holds a transaction that failed to end: abort it first
}

func (b *sinkBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	b.log = b.cfg.logger
	if b.log == nil {
		b.log = tc.Logger
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	opts := append([]kgo.Opt{}, b.cfg.kgoOpts...)
	opts = append(opts, kgo.SeedBrokers(b.cfg.brokers...), kgo.DefaultProduceTopic(b.cfg.topic))
	if b.cfg.txnID != "" {
		opts = append(opts, kgo.TransactionalID(fmt.Sprintf("%s-%d", b.cfg.txnID, tc.TaskIndex)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka sink: client for topic %q: %w", b.cfg.topic, err)
	}
	b.cl = cl
	b.sem = make(chan struct{}, b.cfg.maxInFlight)
	b.held = map[*tuple.Tuple]time.Time{}
	b.ctx, b.cancel = context.WithCancel(ctx)
	if b.cfg.resetAfter > 0 {
		b.wg.Add(1)
		go b.refresh()
	}
	if b.cfg.txnID != "" {
		b.wg.Add(1)
		go b.commitLoop()
	}
	return nil
}

func (b *sinkBolt) Execute(t *tuple.Tuple) {
	rec, err := b.cfg.record(t)
	if err != nil {
		b.out.FailWith(t, err)
		return
	}
	if rec == nil {
		b.out.FailWith(t, fmt.Errorf("%w: the record func returned nil", ErrRecord))
		return
	}
	select {
	case b.sem <- struct{}{}:
	case <-b.ctx.Done():
		return // a hard stop: the tree is abandoned, not failed
	}
	b.mu.Lock()
	b.held[t] = time.Now()
	b.mu.Unlock()
	if b.cfg.txnID == "" {
		b.cl.Produce(b.ctx, rec, func(_ *kgo.Record, err error) { b.done(t, err) })
		return
	}
	b.txnMu.Lock()
	defer b.txnMu.Unlock()
	if !b.txnOpen {
		if b.txnLeft {
			if err := b.cl.EndTransaction(b.ctx, kgo.TryAbort); err != nil {
				b.log.Warn("kafka sink: aborting a transaction that failed to end", "err", err)
			} else {
				b.txnLeft = false
			}
		}
		if err := b.cl.BeginTransaction(); err != nil {
			b.txnMu.Unlock()
			b.done(t, fmt.Errorf("kafka sink: begin transaction: %w", err))
			b.txnMu.Lock()
			return
		}
		b.txnOpen = true
	}
	b.txnIns = append(b.txnIns, t)
	b.cl.Produce(b.ctx, rec, func(_ *kgo.Record, err error) {
		if err != nil {
			b.mu.Lock()
			if b.txnErr == nil {
				b.txnErr = err
			}
			b.mu.Unlock()
		}
	})
}

// done acks t once its record is acknowledged, or fails it with the produce error.
// kgo retries a produce through broker outages until the client closes, so an
// error here is the record's (too large, not authorized...) or the stop's.
func (b *sinkBolt) done(t *tuple.Tuple, err error) {
	b.mu.Lock()
	delete(b.held, t)
	b.mu.Unlock()
	<-b.sem
	switch {
	case err == nil:
		b.out.Ack(t)
	case b.ctx.Err() != nil:
		// The stop interrupted it: neither ack nor fail (the topology abandons it).
	default:
		b.out.FailWith(t, fmt.Errorf("kafka sink: produce to %q: %w", b.cfg.topic, err))
	}
}

// refresh restarts the timeout of inputs held longer than resetAfter: an outage of
// the brokers is not charged to the events it holds.
func (b *sinkBolt) refresh() {
	defer b.wg.Done()
	tick := time.NewTicker(b.cfg.resetAfter / 2)
	defer tick.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case now := <-tick.C:
			var old []*tuple.Tuple
			b.mu.Lock()
			for t, since := range b.held {
				if now.Sub(since) >= b.cfg.resetAfter {
					old = append(old, t)
					b.held[t] = now
				}
			}
			b.mu.Unlock()
			for _, t := range old {
				b.out.ResetTimeout(t)
			}
		}
	}
}

func (b *sinkBolt) commitLoop() {
	defer b.wg.Done()
	tick := time.NewTicker(b.cfg.txnEvery)
	defer tick.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-tick.C:
			b.endTxn(b.ctx)
		}
	}
}

// endTxn flushes and commits the open transaction, then acks its inputs; when a
// produce failed or the commit does not succeed it aborts and fails them.
//
// A commit that fails, or whose outcome is unknown (a transport error, or
// UNKNOWN_SERVER_ERROR), leaves kgo's transaction open: kgo's way on is
// EndTransaction(TryAbort), which aborts it (for an unknown outcome, by bumping
// the producer epoch, which fences it broker-side). Without that abort every
// later BeginTransaction fails, and the broker keeps the transaction open until its
// timeout, holding back every read_committed reader of its partitions. If the
// commit did in fact complete, its records are visible although the inputs are
// failed: the replays write them again (keys dedupe them).
func (b *sinkBolt) endTxn(ctx context.Context) {
	b.txnMu.Lock()
	defer b.txnMu.Unlock()
	if !b.txnOpen {
		return
	}
	ins := b.txnIns
	b.txnIns, b.txnOpen = nil, false
	err := b.cl.Flush(ctx)
	b.mu.Lock()
	if err == nil {
		err = b.txnErr
	}
	b.txnErr = nil
	b.mu.Unlock()
	try := kgo.TryCommit
	if err != nil {
		try = kgo.TryAbort
		if aerr := b.cl.AbortBufferedRecords(ctx); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}
	if eerr := b.cl.EndTransaction(ctx, try); eerr != nil {
		what := "commit"
		if try == kgo.TryAbort {
			what = "abort"
		}
		err = errors.Join(err, fmt.Errorf("%s transaction: %w", what, eerr))
		if aerr := b.cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			b.txnLeft = true // aborted again before the next transaction begins
			err = errors.Join(err, fmt.Errorf("abort transaction: %w", aerr))
		}
		b.log.Warn("kafka sink: transaction failed to end; its inputs fail", "inputs", len(ins), "err", err)
	} else if try == kgo.TryAbort {
		err = fmt.Errorf("transaction aborted: %w", err)
	}
	for _, t := range ins {
		b.done(t, err)
	}
}

// Drain implements topology.Drainer: during a graceful stop it waits for the
// records in flight (commits the open transaction), so their inputs are acked.
func (b *sinkBolt) Drain() {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if b.cfg.txnID != "" {
		b.endTxn(ctx)
		return
	}
	if err := b.cl.Flush(ctx); err != nil {
		b.log.Warn("kafka sink: flush on drain", "err", err)
	}
}

// Cleanup stops the task's goroutines and closes the client; records still in
// flight are abandoned (their trees are replayed by the spout).
func (b *sinkBolt) Cleanup() error {
	if b.cl == nil {
		return nil
	}
	b.cancel()
	b.wg.Wait()
	b.cl.Close()
	return nil
}
