package natsjs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Headers of a dead letter, besides the original message's own headers (those not
// starting with "Nats-").
const (
	HeaderStream   = "Gale-Stream"           // the stream the message was read from
	HeaderSubject  = "Gale-Original-Subject" // the subject it was published to
	HeaderSequence = "Gale-Stream-Sequence"  // its stream sequence, in decimal
	HeaderAttempts = "Gale-Attempts"         // how many of its trees failed, in decimal
	HeaderError    = "Gale-Last-Error"       // the last failure's reason
)

// Defaults of a Source.
const (
	DefaultMaxAttempts = 5
	DefaultBackoffMin  = 500 * time.Millisecond
	DefaultBackoffMax  = 30 * time.Second
	DefaultFetchBatch  = 128
	DefaultFetchWait   = 250 * time.Millisecond
)

// Field is one value of the tuples the spout emits: a part of the message, under a
// field name.
type Field struct {
	name   string
	part   part
	header string
}

type part int

const (
	partSubject part = iota
	partData
	partText
	partSequence
	partDelivered
	partHeader
)

// Name is the field's name in the emitted tuples.
func (f Field) Name() string { return f.name }

// SubjectField is the message's subject, a string.
func SubjectField(name string) Field { return Field{name: name, part: partSubject} }

// DataField is the message's payload, a []byte (not to be modified).
func DataField(name string) Field { return Field{name: name, part: partData} }

// TextField is the message's payload as a string.
func TextField(name string) Field { return Field{name: name, part: partText} }

// SequenceField is the message's stream sequence, a uint64 (also the message id).
func SequenceField(name string) Field { return Field{name: name, part: partSequence} }

// DeliveredField is how many times the server has delivered the message, a uint64
// (1 the first time; stops and moves count too).
func DeliveredField(name string) Field { return Field{name: name, part: partDelivered} }

// HeaderField is the first value of the message's header key, a string ("" when
// the message has none).
func HeaderField(name, key string) Field { return Field{name: name, part: partHeader, header: key} }

// DefaultFields are the fields emitted without WithFields: "subject" (string),
// "data" ([]byte) and "seq" (uint64).
func DefaultFields() []Field {
	return []Field{SubjectField("subject"), DataField("data"), SequenceField("seq")}
}

// SourceOption configures a Source.
type SourceOption func(*sourceConf) error

type sourceConf struct {
	ackWait                time.Duration
	maxAttempts            int
	backoffMin, backoffMax time.Duration
	deadLetter             string
	deadLetterTimeout      time.Duration
	fields                 []Field
	fetchBatch             int
	fetchWait              time.Duration
	filters                []string
}

// WithAckWait sets the consumer's AckWait: how long the server waits for an ack
// before it redelivers. It must be at least 1.25 × Config.MessageTimeout (the
// latest a tree times out); the default is 2 × MessageTimeout. The spout also sends
// InProgress for every tree still pending at half of it, so a tree a bolt keeps
// alive with ResetTimeout is not redelivered.
func WithAckWait(d time.Duration) SourceOption {
	return func(c *sourceConf) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithAckWait(%v): must be positive", ErrOption, d)
		}
		c.ackWait = d
		return nil
	}
}

// WithMaxAttempts sets how many failed trees a message gets before it is
// dead-lettered and terminated (Term). Default DefaultMaxAttempts.
func WithMaxAttempts(n int) SourceOption {
	return func(c *sourceConf) error {
		if n < 1 {
			return fmt.Errorf("%w: WithMaxAttempts(%d): must be at least 1", ErrOption, n)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithBackoff sets the redelivery delay after a failed tree: min after the first
// failure, doubling per failure, at most max (NakWithDelay). Default
// DefaultBackoffMin, DefaultBackoffMax.
func WithBackoff(min, max time.Duration) SourceOption {
	return func(c *sourceConf) error {
		if min <= 0 || max < min {
			return fmt.Errorf("%w: WithBackoff(%v, %v): want 0 < min <= max", ErrOption, min, max)
		}
		c.backoffMin, c.backoffMax = min, max
		return nil
	}
}

// WithDeadLetter publishes a message whose trees failed max attempts to subject
// (through JetStream: a stream must capture it, checked at Open) before it is
// terminated. The dead letter keeps the payload and headers and adds HeaderStream,
// HeaderSubject, HeaderSequence, HeaderAttempts and HeaderError; its Nats-Msg-Id is
// "<stream>.<sequence>", so a dead letter written twice is stored once. Without it
// the message is only terminated, with the last error as the Term reason (the
// server's advisory carries it).
func WithDeadLetter(subject string) SourceOption {
	return func(c *sourceConf) error {
		if subject == "" || strings.ContainsAny(subject, "*> \t\r\n") {
			return fmt.Errorf("%w: WithDeadLetter(%q): want a literal subject", ErrOption, subject)
		}
		c.deadLetter = subject
		return nil
	}
}

// WithFields sets the fields of the emitted tuples, in order (declare the same
// with Output(src.Fields()...)). Default DefaultFields.
func WithFields(fields ...Field) SourceOption {
	return func(c *sourceConf) error {
		if len(fields) == 0 {
			return fmt.Errorf("%w: WithFields(): want at least one field", ErrOption)
		}
		seen := map[string]bool{}
		for _, f := range fields {
			switch {
			case f.name == "":
				return fmt.Errorf("%w: WithFields: a field has no name", ErrOption)
			case seen[f.name]:
				return fmt.Errorf("%w: WithFields: field %q twice", ErrOption, f.name)
			case f.part == partHeader && f.header == "":
				return fmt.Errorf("%w: WithFields: HeaderField %q has no header key", ErrOption, f.name)
			}
			seen[f.name] = true
		}
		c.fields = append([]Field(nil), fields...)
		return nil
	}
}

// WithFetch sets how many messages one pull asks for and how long it waits for
// them. Default DefaultFetchBatch, DefaultFetchWait. Close waits for at most one
// pull's wait.
func WithFetch(batch int, wait time.Duration) SourceOption {
	return func(c *sourceConf) error {
		if batch < 1 || wait <= 0 {
			return fmt.Errorf("%w: WithFetch(%d, %v): want batch >= 1 and wait > 0", ErrOption, batch, wait)
		}
		c.fetchBatch, c.fetchWait = batch, wait
		return nil
	}
}

// WithFilterSubjects makes the consumer read only these subjects of the stream.
func WithFilterSubjects(subjects ...string) SourceOption {
	return func(c *sourceConf) error {
		for _, s := range subjects {
			if s == "" {
				return fmt.Errorf("%w: WithFilterSubjects: an empty subject", ErrOption)
			}
		}
		c.filters = append([]string(nil), subjects...)
		return nil
	}
}

// Source reads a JetStream stream through a durable pull consumer and gives a
// topology its spout tasks: Spout is the factory for Builder.SetSpout. See the
// package documentation for what it guarantees.
type Source struct {
	js               jetstream.JetStream
	stream, durable  string
	conf             sourceConf
	messageTimeout   time.Duration
	maxSpoutPending  int
	emitted, replays atomic.Uint64
	acked, naked     atomic.Uint64
	deadLettered     atomic.Uint64
	deadLetterErrs   atomic.Uint64
	inProgress       atomic.Uint64
	resets           atomic.Uint64
	merged, stale    atomic.Uint64
	fetchErrs        atomic.Uint64
	ackErrs          atomic.Uint64
}

// SourceStats are a Source's counters, summed over its tasks.
type SourceStats struct {
	Emitted      uint64 // trees rooted (first deliveries and redeliveries)
	Replays      uint64 // of which redeliveries (the server's delivery count > 1)
	Acked        uint64 // messages acked after their tree completed
	Naked        uint64 // NakWithDelay after a failed tree
	DeadLettered uint64 // dead-lettered (if configured) and terminated
	// DeadLetterErrors: a dead letter that could not be written; the message was
	// Nak'd and is dead-lettered again at its next delivery.
	DeadLetterErrors uint64
	// InProgress sent: for trees pending past AckWait/2, and for each bolt's
	// ResetTimeout (Resets of them).
	InProgress uint64
	Resets     uint64
	// Merged: a redelivery that reached the task while the tree of an earlier
	// delivery of the same message was still pending there; it was not emitted,
	// and that tree's outcome is applied to it.
	Merged uint64
	// Stale: a delivery the server had given up on (past AckWait) before the
	// spout used it: a buffered message not emitted, or a failure not sent.
	Stale       uint64
	FetchErrors uint64 // pulls that failed (an outage: retried with a backoff)
	AckErrors   uint64 // acks, naks and terms the client refused (closed connection)
}

// Stats returns the counters so far.
func (s *Source) Stats() SourceStats {
	return SourceStats{
		Emitted: s.emitted.Load(), Replays: s.replays.Load(), Acked: s.acked.Load(),
		Naked: s.naked.Load(), DeadLettered: s.deadLettered.Load(),
		DeadLetterErrors: s.deadLetterErrs.Load(), InProgress: s.inProgress.Load(), Resets: s.resets.Load(),
		Merged: s.merged.Load(), Stale: s.stale.Load(), FetchErrors: s.fetchErrs.Load(),
		AckErrors: s.ackErrs.Load(),
	}
}

// NewSource returns a Source reading stream through the durable consumer named
// durable (created or updated at each task's Open), for a topology run with cfg:
// the consumer's AckWait and MaxAckPending follow from cfg.MessageTimeout and
// cfg.MaxSpoutPending. It refuses a cfg without acker tasks (a tree would be acked
// at its emit: at most once), with MaxSpoutPending 0 (the consumer needs a bound)
// or with timeouts disabled, and an AckWait shorter than 1.25 × MessageTimeout
// (ErrAckWait).
func NewSource(js jetstream.JetStream, stream, durable string, cfg topology.Config, opts ...SourceOption) (*Source, error) {
	switch {
	case js == nil:
		return nil, fmt.Errorf("%w: NewSource: nil JetStream", ErrOption)
	case stream == "":
		return nil, fmt.Errorf("%w: NewSource: empty stream name", ErrOption)
	case strings.ContainsAny(stream, ".*> \t\r\n"):
		return nil, fmt.Errorf("%w: NewSource: stream name %q holds '.', '*', '>' or a space", ErrOption, stream)
	case durable == "":
		return nil, fmt.Errorf("%w: NewSource: empty durable consumer name (a durable is what a moved spout resumes from)", ErrOption)
	case strings.ContainsAny(durable, ".*> \t\r\n"):
		return nil, fmt.Errorf("%w: NewSource: durable name %q holds '.', '*', '>' or a space", ErrOption, durable)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: NewSource: %w", ErrOption, err)
	}
	switch {
	case cfg.Ackers == 0:
		return nil, fmt.Errorf("%w: NewSource: Config.Ackers = 0 turns tracking off: every message would be acked at its emit (at most once); use at least 1", ErrOption)
	case cfg.DisableTimeouts:
		return nil, fmt.Errorf("%w: NewSource: Config.DisableTimeouts: the consumer's AckWait needs the message timeout", ErrOption)
	case cfg.MaxSpoutPending == 0:
		return nil, fmt.Errorf("%w: NewSource: Config.MaxSpoutPending = 0 (unlimited): the consumer's MaxAckPending is tasks × MaxSpoutPending, set a bound", ErrOption)
	}
	s := &Source{js: js, stream: stream, durable: durable, messageTimeout: cfg.MessageTimeout,
		maxSpoutPending: cfg.MaxSpoutPending}
	s.conf = sourceConf{
		ackWait: 2 * cfg.MessageTimeout, maxAttempts: DefaultMaxAttempts,
		backoffMin: DefaultBackoffMin, backoffMax: DefaultBackoffMax,
		fields: DefaultFields(), fetchBatch: DefaultFetchBatch, fetchWait: DefaultFetchWait,
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewSource: a nil option", ErrOption)
		}
		if err := o(&s.conf); err != nil {
			return nil, err
		}
	}
	if least := s.minAckWait(); s.conf.ackWait < least {
		return nil, fmt.Errorf("%w: %w: AckWait %v < 1.25 × MessageTimeout %v: the server would redeliver a message whose tree may still be in flight; use at least %v (the default is 2 × MessageTimeout)",
			ErrOption, ErrAckWait, s.conf.ackWait, cfg.MessageTimeout, least)
	}
	s.conf.deadLetterTimeout = min(5*time.Second, s.conf.ackWait/4)
	return s, nil
}

// minAckWait is the latest a tree can time out: 1.25 message timeouts.
func (s *Source) minAckWait() time.Duration { return s.messageTimeout + s.messageTimeout/4 }

// AckWait is the consumer's AckWait.
func (s *Source) AckWait() time.Duration { return s.conf.ackWait }

// Fields are the names of the emitted tuples' fields, for Output.
func (s *Source) Fields() []string {
	names := make([]string, len(s.conf.fields))
	for i, f := range s.conf.fields {
		names[i] = f.name
	}
	return names
}

// Spout returns a new spout task: the factory for Builder.SetSpout.
func (s *Source) Spout() topology.Spout { return &spout{src: s} }

// ConsumerConfig is the consumer a task of parallelism tasks creates or updates.
func (s *Source) ConsumerConfig(tasks int) jetstream.ConsumerConfig {
	cc := jetstream.ConsumerConfig{
		Durable:       s.durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       s.conf.ackWait,
		MaxAckPending: tasks * s.maxSpoutPending,
		MaxDeliver:    -1, // the spout counts attempts and terminates
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if len(s.conf.filters) == 1 {
		cc.FilterSubject = s.conf.filters[0]
	} else {
		cc.FilterSubjects = s.conf.filters
	}
	return cc
}

// spout is one task.
type spout struct {
	src  *Source
	out  topology.SpoutCollector
	log  *slog.Logger
	cons jetstream.Consumer
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	in   chan delivery // the fetcher's messages, not yet taken

	mu      sync.Mutex
	pending map[uint64]*entry // by stream sequence: trees in flight (the keeper reads it)
	dead    []deadJob         // to dead-letter (the dead-letter goroutine takes them)
	deadEnd []deadResult      // dead letters done, for the spout goroutine
	wake    chan struct{}     // a dead job queued

	attempts  map[uint64]*attempt // the task goroutine's only
	lastSweep time.Time
}

type delivery struct {
	msg jetstream.Msg
	at  time.Time // when the fetcher received it
}

// entry is a delivery whose tree is in flight.
type entry struct {
	msg       jetstream.Msg
	delivered uint64    // the server's delivery count of msg
	touched   time.Time // when the server's AckWait clock last restarted (receipt, InProgress)
}

// attempt is what this task knows of a message's failed trees.
type attempt struct {
	n       int
	lastErr string
	at      time.Time
	dead    bool // a dead letter is being written
}

type deadJob struct {
	msg     jetstream.Msg
	seq     uint64
	n       int
	lastErr string
}

type deadResult struct {
	seq uint64
	ok  bool
}

func (s *spout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	src := s.src
	s.out, s.log = out, tc.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	if src.conf.deadLetter != "" {
		if _, err := src.js.StreamNameBySubject(ctx, src.conf.deadLetter); err != nil {
			return fmt.Errorf("%w: dead-letter subject %q: %w", ErrNoStream, src.conf.deadLetter, err)
		}
	}
	tasks := max(tc.Parallelism, 1)
	cons, err := src.js.CreateOrUpdateConsumer(ctx, src.stream, src.ConsumerConfig(tasks))
	if err != nil {
		return fmt.Errorf("natsjs: durable consumer %q on stream %q: %w", src.durable, src.stream, err)
	}
	s.cons = cons
	s.in = make(chan delivery, src.conf.fetchBatch)
	s.pending = map[uint64]*entry{}
	s.attempts = map[uint64]*attempt{}
	s.wake = make(chan struct{}, 1)
	s.lastSweep = time.Now()
	s.ctx, s.stop = context.WithCancel(ctx)
	s.wg.Add(3)
	go s.fetchLoop()
	go s.keepLoop()
	go s.deadLoop()
	return nil
}

// NextTuple emits what the fetcher has received, as far as max spout pending
// allows; it never waits.
func (s *spout) NextTuple() {
	s.settleDead()
	s.sweep()
	room := min(s.src.maxSpoutPending-s.out.Pending(), 64)
	for range room {
		select {
		case d := <-s.in:
			s.take(d)
		default:
			return
		}
	}
}

// take emits d, unless it is stale, a redelivery of a message whose tree is in
// flight here, or a message to dead-letter.
func (s *spout) take(d delivery) {
	src := s.src
	meta, err := d.msg.Metadata()
	if err != nil {
		s.out.ReportError(fmt.Errorf("natsjs: a message on %q without JetStream metadata: %w", d.msg.Subject(), err))
		return
	}
	seq, n := meta.Sequence.Stream, meta.NumDelivered
	if time.Since(d.at) > s.staleAfter() {
		// It waited in the buffer until the server gave up on it: the server
		// redelivers it (perhaps has, to another task). Neither emitted nor Nak'd:
		// a Nak could reach that redelivery (nats-server#4786).
		src.stale.Add(1)
		return
	}
	s.mu.Lock()
	if e := s.pending[seq]; e != nil {
		// A redelivery while the tree of an earlier delivery is in flight here (the
		// keeper fell behind AckWait): the tree's outcome goes to the live delivery.
		if n > e.delivered {
			e.msg, e.delivered, e.touched = d.msg, n, d.at
		}
		s.mu.Unlock()
		src.merged.Add(1)
		return
	}
	s.mu.Unlock()
	if a := s.attempts[seq]; a != nil && a.n >= src.conf.maxAttempts {
		if !a.dead { // its dead letter failed earlier: write it again
			s.deadLetter(d.msg, seq, a)
		}
		return
	}
	if err := s.out.Emit(s.values(d.msg, meta), seq); err != nil {
		s.out.ReportError(fmt.Errorf("natsjs: emit of stream sequence %d: %w", seq, err))
		s.nak(d.msg, 0)
		return
	}
	src.emitted.Add(1)
	if n > 1 {
		src.replays.Add(1)
	}
	s.mu.Lock()
	s.pending[seq] = &entry{msg: d.msg, delivered: n, touched: d.at}
	s.mu.Unlock()
}

func (s *spout) values(m jetstream.Msg, meta *jetstream.MsgMetadata) tuple.Values {
	fields := s.src.conf.fields
	v := make(tuple.Values, len(fields))
	for i, f := range fields {
		switch f.part {
		case partSubject:
			v[i] = m.Subject()
		case partData:
			v[i] = m.Data()
		case partText:
			v[i] = string(m.Data())
		case partSequence:
			v[i] = meta.Sequence.Stream
		case partDelivered:
			v[i] = meta.NumDelivered
		case partHeader:
			v[i] = m.Headers().Get(f.header)
		}
	}
	return v
}

// staleAfter is how long after its AckWait clock restarted a delivery is taken to
// be given up by the server: 90% of AckWait (the clock started when the server
// sent it, a little before the spout received it).
func (s *spout) staleAfter() time.Duration { return s.src.conf.ackWait - s.src.conf.ackWait/10 }

// remove takes seq's entry out of pending; nil if there is none.
func (s *spout) remove(msgID any) (uint64, *entry) {
	seq, ok := msgID.(uint64)
	if !ok {
		return 0, nil
	}
	s.mu.Lock()
	e := s.pending[seq]
	delete(s.pending, seq)
	s.mu.Unlock()
	return seq, e
}

// Ack acks the message of a completed tree. An ack of a delivery the server has
// given up on is still sent: the message was processed in full, and if the server
// applies the ack to a redelivery (nats-server#4786) that redelivery is redundant.
func (s *spout) Ack(msgID any) {
	seq, e := s.remove(msgID)
	if e == nil {
		return
	}
	delete(s.attempts, seq)
	if err := e.msg.Ack(); err != nil {
		s.src.ackErrs.Add(1)
		s.log.Warn("natsjs: ack not sent; the message will be redelivered after AckWait", "seq", seq, "err", err)
		return
	}
	s.src.acked.Add(1)
}

// Fail is FailReason without a reason.
func (s *spout) Fail(msgID any) { s.FailReason(msgID, "") }

// FailReason charges the message an attempt, then Naks it with a growing delay, or
// dead-letters and terminates it after max attempts. A failure of a delivery the
// server has given up on sends nothing (the server redelivers it anyway; a Nak or
// Term could reach the redelivery, nats-server#4786).
func (s *spout) FailReason(msgID any, reason string) {
	seq, e := s.remove(msgID)
	if e == nil {
		return
	}
	a := s.attempts[seq]
	if a == nil {
		a = &attempt{}
		s.attempts[seq] = a
	}
	a.n++
	a.at = time.Now()
	if reason != "" {
		a.lastErr = reason
	}
	s.mu.Lock()
	stale := time.Since(e.touched) > s.staleAfter()
	s.mu.Unlock()
	if stale {
		s.src.stale.Add(1)
		return
	}
	if a.n >= s.src.conf.maxAttempts {
		s.deadLetter(e.msg, seq, a)
		return
	}
	s.nak(e.msg, s.backoff(a.n))
}

// backoff is the redelivery delay after n failed trees.
func (s *spout) backoff(n int) time.Duration {
	d := s.src.conf.backoffMin
	for i := 1; i < n && d < s.src.conf.backoffMax; i++ {
		d *= 2
	}
	return min(d, s.src.conf.backoffMax)
}

func (s *spout) nak(m jetstream.Msg, delay time.Duration) {
	var err error
	if delay > 0 {
		err = m.NakWithDelay(delay)
	} else {
		err = m.Nak()
	}
	if err != nil {
		s.src.ackErrs.Add(1)
		return
	}
	s.src.naked.Add(1)
}

// deadLetter hands m to the dead-letter goroutine.
func (s *spout) deadLetter(m jetstream.Msg, seq uint64, a *attempt) {
	a.dead = true
	lastErr := a.lastErr
	if lastErr == "" {
		lastErr = "failed without a reason"
	}
	s.mu.Lock()
	s.dead = append(s.dead, deadJob{msg: m, seq: seq, n: a.n, lastErr: lastErr})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// settleDead forgets the messages dead-lettered, and lets a message whose dead
// letter failed be dead-lettered again at its next delivery.
func (s *spout) settleDead() {
	s.mu.Lock()
	done := s.deadEnd
	s.deadEnd = nil
	s.mu.Unlock()
	for _, r := range done {
		if r.ok {
			delete(s.attempts, r.seq)
		} else if a := s.attempts[r.seq]; a != nil {
			a.dead = false
		}
	}
}

// sweep forgets, once per AckWait, the attempts of messages not seen for long: a
// redelivery that went to another task of the spout (each task counts what it sees).
func (s *spout) sweep() {
	src := s.src
	now := time.Now()
	if now.Sub(s.lastSweep) < src.conf.ackWait {
		return
	}
	s.lastSweep = now
	horizon := 4 * (src.conf.ackWait + src.conf.backoffMax)
	s.mu.Lock()
	defer s.mu.Unlock()
	for seq, a := range s.attempts {
		if _, busy := s.pending[seq]; !busy && !a.dead && now.Sub(a.at) > horizon {
			delete(s.attempts, seq)
		}
	}
}

// fetchLoop pulls messages into s.in until Close; a pull that fails (an outage) is
// retried after a growing pause. What a pull brings after Close began is Nak'd, so
// that a successor gets it at once.
func (s *spout) fetchLoop() {
	defer s.wg.Done()
	src := s.src
	pause := 50 * time.Millisecond
	for s.ctx.Err() == nil {
		batch, err := s.cons.Fetch(src.conf.fetchBatch, jetstream.FetchMaxWait(src.conf.fetchWait))
		if err == nil {
			for m := range batch.Messages() {
				d := delivery{msg: m, at: time.Now()}
				if s.ctx.Err() != nil {
					_ = m.Nak()
					continue
				}
				select {
				case s.in <- d:
				case <-s.ctx.Done():
					_ = m.Nak()
				}
			}
			err = batch.Error()
			if err == nil || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
				pause = 50 * time.Millisecond
				continue
			}
		}
		if s.ctx.Err() != nil {
			return
		}
		src.fetchErrs.Add(1)
		s.log.Warn("natsjs: pull failed; retrying", "stream", src.stream, "durable", src.durable, "in", pause, "err", err)
		if !s.sleep(pause) {
			return
		}
		pause = min(2*pause, 2*time.Second)
	}
}

func (s *spout) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// TimeoutReset implements topology.TimeoutResetSpout: a bolt restarted the
// tree's message timeout (ResetTimeout), so the message's AckWait restarts too
// (InProgress), as the mapping asks: the server does not redeliver a
// message whose tree a bolt keeps alive.
func (s *spout) TimeoutReset(msgID any) {
	seq, ok := msgID.(uint64)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.pending[seq]; e != nil && e.msg.InProgress() == nil {
		e.touched = time.Now()
		s.src.inProgress.Add(1)
		s.src.resets.Add(1)
	}
}

// keepLoop sends InProgress for every tree in flight past half of AckWait, until
// Close: a tree is never redelivered while it is pending, however long a bolt keeps
// it alive with ResetTimeout.
func (s *spout) keepLoop() {
	defer s.wg.Done()
	src := s.src
	t := time.NewTicker(max(src.conf.ackWait/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			for _, e := range s.pending {
				if now.Sub(e.touched) >= src.conf.ackWait/2 {
					if e.msg.InProgress() == nil {
						e.touched = now
						src.inProgress.Add(1)
					}
				}
			}
			s.mu.Unlock()
		}
	}
}

// deadLoop writes dead letters and terminates their messages, until Close.
func (s *spout) deadLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			if len(s.dead) == 0 {
				s.mu.Unlock()
				break
			}
			j := s.dead[0]
			s.dead = s.dead[1:]
			s.mu.Unlock()
			ok := s.writeDead(j)
			s.mu.Lock()
			s.deadEnd = append(s.deadEnd, deadResult{seq: j.seq, ok: ok})
			s.mu.Unlock()
			if s.ctx.Err() != nil {
				return
			}
		}
	}
}

// writeDead publishes j's dead letter, then terminates its message with the last
// error as the reason. A dead letter not stored Naks the message after the longest
// backoff: it is dead-lettered again at its next delivery, never dropped.
func (s *spout) writeDead(j deadJob) bool {
	src := s.src
	if src.conf.deadLetter != "" {
		m := nats.NewMsg(src.conf.deadLetter)
		m.Data = j.msg.Data()
		for k, vs := range j.msg.Headers() {
			if !strings.HasPrefix(k, "Nats-") {
				m.Header[k] = vs
			}
		}
		m.Header.Set(HeaderStream, src.stream)
		m.Header.Set(HeaderSubject, j.msg.Subject())
		m.Header.Set(HeaderSequence, strconv.FormatUint(j.seq, 10))
		m.Header.Set(HeaderAttempts, strconv.Itoa(j.n))
		m.Header.Set(HeaderError, j.lastErr)
		m.Header.Set(jetstream.MsgIDHeader, src.stream+"."+strconv.FormatUint(j.seq, 10))
		ctx, cancel := context.WithTimeout(s.ctx, src.conf.deadLetterTimeout)
		_, err := src.js.PublishMsg(ctx, m)
		cancel()
		if err != nil {
			src.deadLetterErrs.Add(1)
			s.log.Error("natsjs: dead letter not written; the message is Nak'd and dead-lettered at its next delivery",
				"subject", src.conf.deadLetter, "seq", j.seq, "err", err)
			if s.ctx.Err() == nil {
				_ = j.msg.NakWithDelay(src.conf.backoffMax)
			} else {
				_ = j.msg.Nak() // Close: for the next spout on the durable
			}
			return false
		}
	}
	reason := j.lastErr
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	if err := j.msg.TermWithReason(reason); err != nil {
		src.ackErrs.Add(1)
		s.log.Error("natsjs: Term not sent; the message will be redelivered and dead-lettered again", "seq", j.seq, "err", err)
		return false
	}
	src.deadLettered.Add(1)
	s.log.Warn("natsjs: message dead-lettered after max attempts", "seq", j.seq, "attempts", j.n, "last_error", j.lastErr)
	return true
}

// Close stops the fetcher, the keeper and the dead-letter goroutine, then Naks what
// the task still holds (messages fetched and not emitted, trees a stop abandoned),
// so that the next spout on the durable, here or on another worker, gets them at
// once rather than after AckWait. Nothing it held is charged an attempt.
func (s *spout) Close() error {
	if s.stop == nil {
		return nil
	}
	s.stop()
	s.wg.Wait()
	for {
		select {
		case d := <-s.in:
			_ = d.msg.Nak()
			continue
		default:
		}
		break
	}
	s.mu.Lock()
	for _, e := range s.pending {
		_ = e.msg.Nak()
	}
	s.pending = map[uint64]*entry{}
	for _, j := range s.dead {
		_ = j.msg.Nak()
	}
	s.dead = nil
	s.mu.Unlock()
	return nil
}
