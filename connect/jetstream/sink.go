package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Defaults of a Sink.
const (
	DefaultEventIDField   = "event_id"
	DefaultDataField      = "data"
	DefaultMaxInFlight    = 256
	DefaultPublishTimeout = 5 * time.Second
	DefaultRetryMin       = 100 * time.Millisecond
	DefaultRetryMax       = 2 * time.Second
)

// SinkOption configures a Sink.
type SinkOption func(*sinkConf) error

type sinkConf struct {
	idField, dataField string
	maxInFlight        int
	publishTimeout     time.Duration
	retryMin, retryMax time.Duration
	headerFields       map[string]string // field -> header
	headerOrder        []string
}

// WithEventIDField names the input field holding the event id (a non-empty
// string), sent as Nats-Msg-Id. Default DefaultEventIDField.
func WithEventIDField(name string) SinkOption {
	return func(c *sinkConf) error {
		if name == "" {
			return fmt.Errorf("%w: WithEventIDField(\"\"): want a field name", ErrOption)
		}
		c.idField = name
		return nil
	}
}

// WithDataField names the input field holding the payload ([]byte or string).
// Default DefaultDataField.
func WithDataField(name string) SinkOption {
	return func(c *sinkConf) error {
		if name == "" {
			return fmt.Errorf("%w: WithDataField(\"\"): want a field name", ErrOption)
		}
		c.dataField = name
		return nil
	}
}

// WithHeaderField sends the input field (a string) as the message header key.
func WithHeaderField(field, key string) SinkOption {
	return func(c *sinkConf) error {
		if field == "" || key == "" || strings.HasPrefix(key, "Nats-") {
			return fmt.Errorf("%w: WithHeaderField(%q, %q): want a field and a header key not starting with Nats-", ErrOption, field, key)
		}
		if c.headerFields == nil {
			c.headerFields = map[string]string{}
		}
		if _, dup := c.headerFields[field]; !dup {
			c.headerOrder = append(c.headerOrder, field)
		}
		c.headerFields[field] = key
		return nil
	}
}

// WithMaxInFlight bounds the publishes awaiting their PubAck, per task. Inputs
// beyond it wait in the task, in order (max spout pending bounds them upstream).
// Default DefaultMaxInFlight.
func WithMaxInFlight(n int) SinkOption {
	return func(c *sinkConf) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxInFlight(%d): must be at least 1", ErrOption, n)
		}
		c.maxInFlight = n
		return nil
	}
}

// WithPublishTimeout sets how long a publish waits for its PubAck before it is
// taken for an outage and retried. Default DefaultPublishTimeout.
func WithPublishTimeout(d time.Duration) SinkOption {
	return func(c *sinkConf) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithPublishTimeout(%v): must be positive", ErrOption, d)
		}
		c.publishTimeout = d
		return nil
	}
}

// WithRetryBackoff sets the pause between probes during an outage: min, doubling,
// at most max. Keep max well under the message timeout: the held inputs' timeouts
// are reset at every probe. Default DefaultRetryMin, DefaultRetryMax.
func WithRetryBackoff(min, max time.Duration) SinkOption {
	return func(c *sinkConf) error {
		if min <= 0 || max < min {
			return fmt.Errorf("%w: WithRetryBackoff(%v, %v): want 0 < min <= max", ErrOption, min, max)
		}
		c.retryMin, c.retryMax = min, max
		return nil
	}
}

// Sink publishes each input to a JetStream subject with the event id as
// Nats-Msg-Id, and acks the input once the stream has stored it: Bolt is the
// factory for Builder.SetBolt. See the package documentation.
type Sink struct {
	js      jetstream.JetStream
	subject string
	conf    sinkConf

	published, stored, duplicates atomic.Uint64
	failed, retries, outages      atomic.Uint64
}

// SinkStats are a Sink's counters, summed over its tasks.
type SinkStats struct {
	Published  uint64 // publishes sent, retries included
	Stored     uint64 // inputs acked after a PubAck
	Duplicates uint64 // of which the stream had stored already (PubAck.Duplicate)
	Failed     uint64 // inputs failed: their own fault (bad field, too large)
	Retries    uint64 // publishes sent again after an outage
	Outages    uint64 // outages begun: a publish failed for a reason not the event's
}

// Stats returns the counters so far.
func (s *Sink) Stats() SinkStats {
	return SinkStats{Published: s.published.Load(), Stored: s.stored.Load(),
		Duplicates: s.duplicates.Load(), Failed: s.failed.Load(), Retries: s.retries.Load(),
		Outages: s.outages.Load()}
}

// NewSink returns a Sink publishing to subject (a literal subject, which a stream
// must capture: checked at each task's Prepare).
func NewSink(js jetstream.JetStream, subject string, opts ...SinkOption) (*Sink, error) {
	switch {
	case js == nil:
		return nil, fmt.Errorf("%w: NewSink: nil JetStream", ErrOption)
	case subject == "" || strings.ContainsAny(subject, "*> \t\r\n"):
		return nil, fmt.Errorf("%w: NewSink: subject %q: want a literal subject", ErrOption, subject)
	}
	s := &Sink{js: js, subject: subject, conf: sinkConf{
		idField: DefaultEventIDField, dataField: DefaultDataField, maxInFlight: DefaultMaxInFlight,
		publishTimeout: DefaultPublishTimeout, retryMin: DefaultRetryMin, retryMax: DefaultRetryMax,
	}}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewSink: a nil option", ErrOption)
		}
		if err := o(&s.conf); err != nil {
			return nil, err
		}
	}
	if s.conf.idField == s.conf.dataField {
		return nil, fmt.Errorf("%w: NewSink: the event id and the data are both field %q", ErrOption, s.conf.idField)
	}
	return s, nil
}

// Bolt returns a new sink task: the factory for Builder.SetBolt.
func (s *Sink) Bolt() topology.Bolt { return &sinkBolt{snk: s} }

// InputFields are the input fields every tuple must carry: the event id, the
// data, and the header fields, in that order. A stream without one of them would
// have each of its tuples failed.
func (s *Sink) InputFields() []string {
	return append([]string{s.conf.idField, s.conf.dataField}, s.conf.headerOrder...)
}

// sinkBolt is one task. Execute queues; one goroutine publishes, waits for the
// PubAcks in publish order, and acks, fails or holds the inputs.
type sinkBolt struct {
	snk  *Sink
	out  topology.OutputCollector
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	wake chan struct{}

	mu     sync.Mutex
	queue  []*pub // not published yet, in order
	flight []*pub // published, in publish order
}

type pub struct {
	in       *tuple.Tuple
	id       string
	msg      *nats.Msg
	fut      jetstream.PubAckFuture
	err      error
	deadline time.Time
}

func (b *sinkBolt) Prepare(ctx context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.out, b.log = out, tc.Logger
	if b.log == nil {
		b.log = slog.Default()
	}
	if _, err := b.snk.js.StreamNameBySubject(ctx, b.snk.subject); err != nil {
		return fmt.Errorf("%w: %q (create a stream for it before the topology starts): %w", ErrNoStream, b.snk.subject, err)
	}
	b.wake = make(chan struct{}, 1)
	b.ctx, b.stop = context.WithCancel(ctx)
	b.wg.Add(1)
	go b.run()
	return nil
}

// Execute makes the input's message and queues it; an input without a usable
// event id or payload is failed (its own fault).
func (b *sinkBolt) Execute(t *tuple.Tuple) {
	c := &b.snk.conf
	msg, id, err := b.message(t, c)
	if err != nil {
		b.snk.failed.Add(1)
		_ = b.out.FailWith(t, err)
		return
	}
	b.mu.Lock()
	b.queue = append(b.queue, &pub{in: t, id: id, msg: msg})
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *sinkBolt) message(t *tuple.Tuple, c *sinkConf) (*nats.Msg, string, error) {
	v, ok := t.Lookup(c.idField)
	id, isStr := v.(string)
	switch {
	case !ok:
		return nil, "", fmt.Errorf("%w: no field %q (the event id) in a tuple from %s", ErrInput, c.idField, t.SourceComponent())
	case !isStr || id == "":
		return nil, "", fmt.Errorf("%w: field %q (the event id) is %T %v, want a non-empty string", ErrInput, c.idField, v, v)
	}
	msg := nats.NewMsg(b.snk.subject)
	dv, ok := t.Lookup(c.dataField)
	switch d := dv.(type) {
	case []byte:
		msg.Data = d
	case string:
		msg.Data = []byte(d)
	default:
		if !ok {
			return nil, "", fmt.Errorf("%w: no field %q (the payload) in a tuple from %s", ErrInput, c.dataField, t.SourceComponent())
		}
		return nil, "", fmt.Errorf("%w: field %q (the payload) is %T, want []byte or string", ErrInput, c.dataField, d)
	}
	for _, f := range c.headerOrder {
		hv, ok := t.Lookup(f)
		s, isStr := hv.(string)
		if !ok || !isStr {
			return nil, "", fmt.Errorf("%w: field %q (header %s) is %T, want a string", ErrInput, f, c.headerFields[f], hv)
		}
		msg.Header.Set(c.headerFields[f], s)
	}
	msg.Header.Set(jetstream.MsgIDHeader, id)
	return msg, id, nil
}

// run publishes and resolves until Cleanup or the end of the topology's context.
// In an outage it holds every input (in flight ones back in the queue, in order),
// resets their timeouts, and probes with one publish at a time after a growing
// pause; when one is stored the rest follow.
func (b *sinkBolt) run() {
	defer b.wg.Done()
	snk, c := b.snk, &b.snk.conf
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var pause time.Duration // > 0 during an outage
	for {
		b.mu.Lock()
		limit := c.maxInFlight
		if pause > 0 {
			limit = 1
		}
		for len(b.flight) < limit && len(b.queue) > 0 {
			p := b.queue[0]
			b.queue[0] = nil
			b.queue = b.queue[1:]
			p.fut, p.err = snk.js.PublishMsgAsync(p.msg)
			p.deadline = time.Now().Add(c.publishTimeout)
			snk.published.Add(1)
			b.flight = append(b.flight, p)
		}
		var head *pub
		if len(b.flight) > 0 {
			head = b.flight[0]
		}
		b.mu.Unlock()
		if head == nil {
			select {
			case <-b.wake:
				continue
			case <-b.ctx.Done():
				return
			}
		}
		var ack *jetstream.PubAck
		err := head.err
		if err == nil {
			timer.Reset(time.Until(head.deadline))
			select {
			case ack = <-head.fut.Ok():
			case err = <-head.fut.Err():
			case <-timer.C:
				err = fmt.Errorf("no PubAck within %v: %w", c.publishTimeout, context.DeadlineExceeded)
			case <-b.wake:
				timer.Stop()
				continue // publish what came meanwhile
			case <-b.ctx.Done():
				return
			}
			timer.Stop()
		}
		b.mu.Lock()
		b.flight[0] = nil
		b.flight = b.flight[1:]
		b.mu.Unlock()
		switch {
		case err == nil:
			if pause > 0 {
				b.log.Info("natsjs: sink publishing again", "subject", snk.subject)
				pause = 0
			}
			snk.stored.Add(1)
			if ack.Duplicate {
				snk.duplicates.Add(1)
			}
			_ = b.out.Ack(head.in)
		case eventsFault(err):
			snk.failed.Add(1)
			_ = b.out.FailWith(head.in, fmt.Errorf("natsjs: publish of event %q to %q: %w", head.id, snk.subject, err))
		default:
			if pause == 0 {
				snk.outages.Add(1)
				pause = c.retryMin
				b.out.ReportError(fmt.Errorf("natsjs: publish to %q failed, holding the inputs and retrying (an outage is not charged to them): %w", snk.subject, err))
			} else {
				pause = min(2*pause, c.retryMax)
			}
			held := b.holdAll(head)
			for _, t := range held {
				_ = b.out.ResetTimeout(t)
			}
			if !b.sleep(timer, pause) {
				return
			}
		}
	}
}

// holdAll puts head and every publish in flight back at the front of the queue, in
// order, and returns every input held. A publish put back may still be stored: its
// retry is then a duplicate, which the stream drops (same Nats-Msg-Id).
func (b *sinkBolt) holdAll(head *pub) []*tuple.Tuple {
	b.mu.Lock()
	defer b.mu.Unlock()
	back := make([]*pub, 0, 1+len(b.flight)+len(b.queue))
	back = append(back, head)
	back = append(back, b.flight...)
	b.snk.retries.Add(uint64(1 + len(b.flight)))
	back = append(back, b.queue...)
	b.queue, b.flight = back, nil
	held := make([]*tuple.Tuple, len(back))
	for i, p := range back {
		p.fut, p.err = nil, nil
		held[i] = p.in
	}
	return held
}

func (b *sinkBolt) sleep(timer *time.Timer, d time.Duration) bool {
	timer.Reset(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-b.ctx.Done():
		return false
	}
}

// eventsFault reports whether a publish failed because of the message itself (too
// large for the connection or the stream); every other failure is an outage.
func eventsFault(err error) bool {
	if errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadHeaderMsg) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}

// Cleanup stops the publishing goroutine. Inputs still held (a stop during an
// outage) are abandoned, as the stop's: their spouts replay them, and the stream
// drops the copies it already has.
func (b *sinkBolt) Cleanup() error {
	if b.stop == nil {
		return nil
	}
	b.stop()
	b.wg.Wait()
	return nil
}
