package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// SpoutFields are the fields of the tuples the spout emits, one per Kafka record:
//
//	topic      string
//	partition  int32
//	offset     int64
//	key        []byte  nil when the record has none
//	value      []byte
//	timestamp  int64   Unix nanoseconds
var SpoutFields = []string{"topic", "partition", "offset", "key", "value", "timestamp"}

// MessageID is the message id of a spout tuple: the record's topic, partition and
// offset. Ack and Fail receive it back; String gives "topic/partition/offset".
type MessageID struct {
	Topic     string
	Partition int32
	Offset    int64
	gen       uint64 // the assignment of the partition it was emitted under
}

func (m MessageID) String() string {
	return m.Topic + "/" + strconv.Itoa(int(m.Partition)) + "/" + strconv.FormatInt(m.Offset, 10)
}

// ErrOption wraps every invalid option of NewSource and NewSink.
var ErrOption = errors.New("kafka: invalid option")

// Reset is where a group with no committed offset for a partition starts reading.
type Reset int

const (
	Earliest Reset = iota // the oldest record kept (auto.offset.reset=earliest)
	Latest                // records produced from now on (auto.offset.reset=latest)
)

type sourceConfig struct {
	brokers       []string
	group         string
	topics        []string
	reset         Reset
	readCommitted bool
	maxAttempts   int
	deadLetter    string
	backoff       time.Duration
	maxBackoff    time.Duration
	commitEvery   time.Duration
	commitTimeout time.Duration
	revokeWait    time.Duration
	maxBuffered   int
	onCommit      func(topic string, partition int32, offset int64)
	logger        *slog.Logger
	kgoOpts       []kgo.Opt
}

// SourceOption configures NewSource.
type SourceOption func(*sourceConfig) error

// WithOffsetReset sets where a partition with no committed offset starts
// (auto.offset.reset). Default Earliest.
func WithOffsetReset(r Reset) SourceOption {
	return func(c *sourceConfig) error {
		if r != Earliest && r != Latest {
			return fmt.Errorf("%w: offset reset %d is neither Earliest nor Latest", ErrOption, r)
		}
		c.reset = r
		return nil
	}
}

// WithReadCommitted reads with isolation.level=read_committed: records of aborted
// transactions are skipped and open transactions are waited for; offsets start
// from stable committed offsets. Default read_uncommitted.
func WithReadCommitted() SourceOption {
	return func(c *sourceConfig) error { c.readCommitted = true; return nil }
}

// WithDeadLetter caps the attempts of a record at maxAttempts emits: when its
// tree fails the last time, the record is re-read and produced to topic, keyed
// "topic/partition/offset", with its original key, the attempts and the last
// failure's reason in headers (see DeadLetter headers in the package doc); once
// the dead-letter topic has it the partition moves past it. Without this option a
// record is replayed until its tree completes.
func WithDeadLetter(topic string, maxAttempts int) SourceOption {
	return func(c *sourceConfig) error {
		if topic == "" {
			return fmt.Errorf("%w: dead-letter topic is empty", ErrOption)
		}
		if maxAttempts < 1 {
			return fmt.Errorf("%w: max attempts %d, must be >= 1", ErrOption, maxAttempts)
		}
		c.deadLetter, c.maxAttempts = topic, maxAttempts
		return nil
	}
}

// WithRetryBackoff sets the delay before a failed record is re-read: first, doubled
// per attempt up to max. Default 10 ms up to 5 s; 0, 0 replays at once.
func WithRetryBackoff(first, max time.Duration) SourceOption {
	return func(c *sourceConfig) error {
		if first < 0 || max < first {
			return fmt.Errorf("%w: retry backoff %v up to %v, need 0 <= first <= max", ErrOption, first, max)
		}
		c.backoff, c.maxBackoff = first, max
		return nil
	}
}

// WithCommitInterval sets how often the acked prefix of each partition is
// committed (besides on revoke and on Close). Default 1 s.
func WithCommitInterval(d time.Duration) SourceOption {
	return func(c *sourceConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: commit interval %v, must be > 0", ErrOption, d)
		}
		c.commitEvery = d
		return nil
	}
}

// WithRevokeWait bounds how long a revoked partition's pending trees are waited
// for before its offset is committed and it is handed over (what is still pending
// then is replayed by the next owner). Keep it well below the group's rebalance
// timeout (kgo's default 60 s). Default 10 s.
func WithRevokeWait(d time.Duration) SourceOption {
	return func(c *sourceConfig) error {
		if d < 0 {
			return fmt.Errorf("%w: revoke wait %v, must be >= 0", ErrOption, d)
		}
		c.revokeWait = d
		return nil
	}
}

// WithMaxBuffered bounds the records a spout task holds fetched but not yet
// emitted. Default 1024.
func WithMaxBuffered(n int) SourceOption {
	return func(c *sourceConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: max buffered %d, must be >= 1", ErrOption, n)
		}
		c.maxBuffered = n
		return nil
	}
}

// WithCommitHook calls fn with each offset chosen for a commit, while the spout's
// state is locked, before the commit is sent: every record of the partition below
// offset was acked or dead-lettered. fn must return quickly and not call the Source.
func WithCommitHook(fn func(topic string, partition int32, offset int64)) SourceOption {
	return func(c *sourceConfig) error { c.onCommit = fn; return nil }
}

// WithLogger sets the logger. Default: the task's logger.
func WithLogger(l *slog.Logger) SourceOption {
	return func(c *sourceConfig) error { c.logger = l; return nil }
}

// WithKgoOptions adds options to the kgo client of every spout task (TLS, SASL,
// timeouts...). The options the spout relies on are applied after them and win:
// the group and topics, DisableAutoCommit, BlockRebalanceOnPoll, the rebalance
// callbacks, the reset offset and the isolation level.
func WithKgoOptions(opts ...kgo.Opt) SourceOption {
	return func(c *sourceConfig) error { c.kgoOpts = append(c.kgoOpts, opts...); return nil }
}

// Source reads topics as a consumer group. Spout returns the factory to give the
// topology builder; each task is one member of the group. Lag and Collector report
// the consumer lag of every task of the Source.
type Source struct {
	cfg   sourceConfig
	mu    sync.Mutex
	tasks map[*spout]struct{}
}

// NewSource returns a Source reading topics from brokers as consumer group group.
func NewSource(brokers []string, group string, topics []string, opts ...SourceOption) (*Source, error) {
	c := sourceConfig{
		brokers: brokers, group: group, topics: topics,
		backoff: 10 * time.Millisecond, maxBackoff: 5 * time.Second,
		commitEvery: time.Second, commitTimeout: 10 * time.Second, revokeWait: 10 * time.Second,
		maxBuffered: 1024,
	}
	switch {
	case len(brokers) == 0:
		return nil, fmt.Errorf("%w: no seed brokers", ErrOption)
	case group == "":
		return nil, fmt.Errorf("%w: empty consumer group (the spout commits offsets as a group)", ErrOption)
	case len(topics) == 0:
		return nil, fmt.Errorf("%w: no topics", ErrOption)
	}
	for _, t := range topics {
		if t == "" {
			return nil, fmt.Errorf("%w: an empty topic name in %q", ErrOption, topics)
		}
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: a nil option", ErrOption)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	for _, t := range topics {
		if t == c.deadLetter {
			return nil, fmt.Errorf("%w: dead-letter topic %q is also read: a dead letter would be read again", ErrOption, t)
		}
	}
	return &Source{cfg: c, tasks: map[*spout]struct{}{}}, nil
}

// Spout returns the factory of the spout.
func (s *Source) Spout() func() topology.Spout {
	return func() topology.Spout { return &spout{src: s} }
}

// PartitionLag is the consumer lag of one partition a task of the Source owns.
type PartitionLag struct {
	Topic     string
	Partition int32
	// HighWatermark is the partition's end offset at the last fetch.
	HighWatermark int64
	// Committed is the last offset committed by the spout, or where it started
	// reading when it has not committed yet.
	Committed int64
	// Lag is HighWatermark - Committed: records not yet known processed.
	Lag int64
}

// Lag returns the lag of every partition the tasks of the Source own, by topic and
// partition.
func (s *Source) Lag() []PartitionLag {
	s.mu.Lock()
	tasks := make([]*spout, 0, len(s.tasks))
	for t := range s.tasks {
		tasks = append(tasks, t)
	}
	s.mu.Unlock()
	var out []PartitionLag
	for _, t := range tasks {
		out = append(out, t.lag()...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

type tp struct {
	topic     string
	partition int32
}

// partState is a partition the task owns.
type partState struct {
	gen       uint64
	tr        *tracker
	buf       []*kgo.Record // fetched, to emit in order
	hw        int64
	committed int64 // last committed; -1 before
	lastSeek  time.Time
}

// spout is one task: a group member. The poller goroutine polls kgo, hands the
// records to the task through bufs under mu, applies seeks and commits while
// rebalances are blocked (BlockRebalanceOnPoll), then allows them. The task
// goroutine emits from the bufs and takes acks and fails. The revoke callback runs
// on kgo's group goroutine.
type spout struct {
	src *Source
	cfg *sourceConfig
	out topology.SpoutCollector
	log *slog.Logger
	cl  *kgo.Client

	cancel context.CancelFunc
	wg     sync.WaitGroup
	roomC  chan struct{} // the task made room in the buffers

	mu         sync.Mutex
	parts      map[tp]*partState
	order      []tp // round robin over parts
	next       int
	buffered   int
	gen        uint64
	closing    bool
	closed     chan struct{}
	changed    chan struct{} // closed and replaced when an ack or fail lands
	pollCancel context.CancelFunc
}

func (sp *spout) Open(ctx context.Context, tc topology.TaskContext, out topology.SpoutCollector) error {
	sp.cfg = &sp.src.cfg
	sp.out = out
	sp.log = sp.cfg.logger
	if sp.log == nil {
		sp.log = tc.Logger
	}
	if sp.log == nil {
		sp.log = slog.Default()
	}
	sp.parts = map[tp]*partState{}
	sp.roomC = make(chan struct{}, 1)
	sp.closed = make(chan struct{})
	sp.changed = make(chan struct{})

	reset := kgo.NewOffset().AtStart()
	if sp.cfg.reset == Latest {
		reset = kgo.NewOffset().AtEnd()
	}
	opts := append([]kgo.Opt{}, sp.cfg.kgoOpts...)
	opts = append(opts,
		kgo.SeedBrokers(sp.cfg.brokers...),
		kgo.ConsumerGroup(sp.cfg.group),
		kgo.ConsumeTopics(sp.cfg.topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(sp.onRevoked),
		kgo.OnPartitionsLost(sp.onLost),
		kgo.ConsumeResetOffset(reset),
	)
	if sp.cfg.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka spout: client for group %q: %w", sp.cfg.group, err)
	}
	sp.cl = cl
	pctx, cancel := context.WithCancel(ctx)
	sp.cancel = cancel
	sp.src.mu.Lock()
	sp.src.tasks[sp] = struct{}{}
	sp.src.mu.Unlock()
	sp.wg.Add(1)
	go sp.poll(pctx)
	return nil
}

// NextTuple emits the next buffered record of the next partition, round robin. It
// takes only the spout's lock, which nothing holds across I/O.
func (sp *spout) NextTuple() {
	sp.mu.Lock()
	var (
		rec *kgo.Record
		id  MessageID
	)
	for i := 0; i < len(sp.order) && rec == nil; i++ {
		sp.next = (sp.next + 1) % len(sp.order)
		k := sp.order[sp.next]
		ps := sp.parts[k]
		if len(ps.buf) == 0 {
			continue
		}
		r := ps.buf[0]
		ps.buf[0] = nil
		ps.buf = ps.buf[1:]
		sp.buffered--
		ps.tr.emitted(r.Offset)
		rec, id = r, MessageID{Topic: k.topic, Partition: k.partition, Offset: r.Offset, gen: ps.gen}
	}
	sp.mu.Unlock()
	if rec == nil {
		return
	}
	select {
	case sp.roomC <- struct{}{}:
	default:
	}
	if err := sp.out.Emit(tuple.Values{rec.Topic, rec.Partition, rec.Offset, rec.Key, rec.Value, rec.Timestamp.UnixNano()}, id); err != nil {
		sp.log.Warn("kafka spout: emit refused; the record is re-read", "record", id.String(), "err", err)
		sp.mu.Lock()
		if ps := sp.parts[tp{id.Topic, id.Partition}]; ps != nil && ps.gen == id.gen {
			ps.tr.unemit(id.Offset, time.Now())
		}
		sp.mu.Unlock()
		sp.wake()
	}
}

func (sp *spout) Ack(msgID any) {
	id, ok := msgID.(MessageID)
	if !ok {
		return
	}
	sp.mu.Lock()
	if ps := sp.parts[tp{id.Topic, id.Partition}]; ps != nil && ps.gen == id.gen {
		ps.tr.ack(id.Offset)
	}
	sp.notifyLocked()
	sp.mu.Unlock()
}

func (sp *spout) Fail(msgID any) { sp.FailReason(msgID, "") }

// FailReason implements topology.ReasonedSpout: the reason is the last error a
// dead letter carries.
func (sp *spout) FailReason(msgID any, reason string) {
	id, ok := msgID.(MessageID)
	if !ok {
		return
	}
	sp.mu.Lock()
	if ps := sp.parts[tp{id.Topic, id.Partition}]; ps != nil && ps.gen == id.gen {
		attempts := 0
		if e := ps.tr.entry(id.Offset); e != nil {
			attempts = e.attempts
		}
		ps.tr.fail(id.Offset, reason, time.Now().Add(sp.backoff(attempts)), sp.cfg.maxAttempts)
	}
	sp.notifyLocked()
	sp.mu.Unlock()
	sp.wake()
}

func (sp *spout) backoff(attempts int) time.Duration {
	d := sp.cfg.backoff
	for i := 1; i < attempts && d < sp.cfg.maxBackoff; i++ {
		d *= 2
	}
	return min(d, sp.cfg.maxBackoff)
}

// notifyLocked wakes a revoke waiting for pending trees.
func (sp *spout) notifyLocked() {
	close(sp.changed)
	sp.changed = make(chan struct{})
}

// wake cuts the poller's current poll short, to seek or commit now.
func (sp *spout) wake() {
	sp.mu.Lock()
	if sp.pollCancel != nil {
		sp.pollCancel()
	}
	sp.mu.Unlock()
}

// Close stops the poller, commits the acked prefix of every partition and leaves
// the group. The engine calls it once every pending tree finished or was abandoned.
func (sp *spout) Close() error {
	if sp.cl == nil {
		return nil
	}
	sp.mu.Lock()
	sp.closing = true
	close(sp.closed)
	sp.mu.Unlock()
	sp.cancel()
	sp.wg.Wait()
	err := sp.commit(context.Background(), nil)
	sp.cl.Close() // leaves the group: onRevoked commits again, without waiting
	sp.src.mu.Lock()
	delete(sp.src.tasks, sp)
	sp.src.mu.Unlock()
	return err
}

// poll is the poller goroutine, stopped by Close (ctx).
func (sp *spout) poll(ctx context.Context) {
	defer sp.wg.Done()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	nextCommit := time.Now().Add(sp.cfg.commitEvery)
	for ctx.Err() == nil {
		sp.mu.Lock()
		room := sp.cfg.maxBuffered - sp.buffered
		deadline := nextCommit
		for _, ps := range sp.parts {
			if due, ok := ps.tr.nextDue(); ok {
				// A replay is sought when due, and sought again only after
				// reseekAfter: wait for the records of the last seek until then.
				deadline = earliest(deadline, latest(due, ps.lastSeek.Add(reseekAfter)))
			}
		}
		// A poll whose context has ended takes no record: give it a moment.
		deadline = latest(deadline, time.Now().Add(time.Millisecond))
		var fetches kgo.Fetches
		if room <= 0 {
			sp.mu.Unlock()
			t := time.NewTimer(time.Until(deadline))
			select {
			case <-sp.roomC:
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			// A canceled poll takes no record but blocks rebalances, so the seeks
			// and commit below cannot cross one.
			fetches = sp.cl.PollRecords(canceled, 1)
		} else {
			pctx, pcancel := context.WithDeadline(ctx, deadline)
			sp.pollCancel = pcancel
			sp.mu.Unlock()
			fetches = sp.cl.PollRecords(pctx, room)
			sp.mu.Lock()
			sp.pollCancel = nil
			sp.mu.Unlock()
			pcancel()
		}
		seeks, dead := sp.ingest(fetches)
		if len(seeks) > 0 {
			sp.cl.SetOffsets(seeks)
		}
		for _, d := range dead {
			sp.deadLetter(ctx, d)
		}
		if now := time.Now(); !now.Before(nextCommit) {
			if err := sp.commit(ctx, nil); err != nil && ctx.Err() == nil {
				sp.log.Warn("kafka spout: commit failed; retried next interval", "err", err)
			}
			nextCommit = now.Add(sp.cfg.commitEvery)
		}
		sp.cl.AllowRebalance()
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

type deadRec struct {
	rec      *kgo.Record
	gen      uint64
	attempts int
	reason   string
}

// reseekAfter is how long a seek is given to bring a due replay back before the
// partition is sought again (a seek can be overtaken by a fetch in flight).
const reseekAfter = 500 * time.Millisecond

// ingest hands fetched records to the partitions' buffers and returns the seeks
// for due replays and the records to dead-letter.
func (sp *spout) ingest(fetches kgo.Fetches) (map[string]map[int32]kgo.EpochOffset, []deadRec) {
	now := time.Now()
	fetches.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		sp.log.Warn("kafka spout: fetch error", "topic", t, "partition", p, "err", err)
	})
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var dead []deadRec
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Err != nil && len(p.Records) == 0 {
			return
		}
		k := tp{p.Topic, p.Partition}
		ps := sp.parts[k]
		if ps == nil {
			// Records come only for partitions assigned now: rebalance callbacks
			// and polls exclude each other (BlockRebalanceOnPoll).
			sp.gen++
			ps = &partState{gen: sp.gen, tr: newTracker(), committed: -1}
			sp.parts[k] = ps
			sp.order = append(sp.order, k)
		}
		ps.hw = p.HighWatermark
		for _, r := range p.Records {
			switch ps.tr.read(r.Offset, now) {
			case actEmit:
				ps.buf = append(ps.buf, r)
				sp.buffered++
			case actDeadLetter:
				e := ps.tr.entry(r.Offset)
				dead = append(dead, deadRec{rec: r, gen: ps.gen, attempts: e.attempts, reason: e.reason})
			}
		}
	})
	var seeks map[string]map[int32]kgo.EpochOffset
	for k, ps := range sp.parts {
		off, ok := ps.tr.seekTarget(now)
		if !ok || now.Sub(ps.lastSeek) < reseekAfter {
			continue
		}
		ps.lastSeek = now
		if seeks == nil {
			seeks = map[string]map[int32]kgo.EpochOffset{}
		}
		if seeks[k.topic] == nil {
			seeks[k.topic] = map[int32]kgo.EpochOffset{}
		}
		seeks[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	return seeks, dead
}

// Dead-letter record headers.
const (
	HeaderTopic     = "gale.topic"
	HeaderPartition = "gale.partition"
	HeaderOffset    = "gale.offset"
	HeaderKey       = "gale.key"
	HeaderAttempts  = "gale.attempts"
	HeaderError     = "gale.error"
)

// deadLetter produces d to the dead-letter topic; the partition moves past it
// once the produce is acknowledged, and re-reads it to try again if it fails.
func (sp *spout) deadLetter(ctx context.Context, d deadRec) {
	r := d.rec
	id := MessageID{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	reason := d.reason
	if reason == "" {
		reason = "failed without a reason"
	}
	dl := &kgo.Record{
		Topic: sp.cfg.deadLetter,
		Key:   []byte(id.String()),
		Value: r.Value,
		Headers: append([]kgo.RecordHeader{
			{Key: HeaderTopic, Value: []byte(r.Topic)},
			{Key: HeaderPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
			{Key: HeaderOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
			{Key: HeaderKey, Value: r.Key},
			{Key: HeaderAttempts, Value: []byte(strconv.Itoa(d.attempts))},
			{Key: HeaderError, Value: []byte(reason)},
		}, r.Headers...),
	}
	sp.log.Warn("kafka spout: record out of attempts, dead-lettered", "record", id.String(), "attempts", d.attempts, "reason", reason)
	sp.cl.Produce(ctx, dl, func(_ *kgo.Record, err error) {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		ps := sp.parts[tp{r.Topic, r.Partition}]
		if ps == nil || ps.gen != d.gen {
			return
		}
		if err != nil {
			sp.log.Warn("kafka spout: dead-letter produce failed; the record is re-read", "record", id.String(), "err", err)
		}
		ps.tr.deadLettered(r.Offset, err == nil)
		sp.notifyLocked()
	})
}

// commit commits the acked prefix of the partitions in only (all when nil) that
// moved since their last commit.
func (sp *spout) commit(ctx context.Context, only map[tp]*partState) error {
	sp.mu.Lock()
	parts := only
	if parts == nil {
		parts = sp.parts
	}
	offs := map[string]map[int32]kgo.EpochOffset{}
	for k, ps := range parts {
		c := ps.tr.committed()
		if c <= ps.committed {
			continue
		}
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offs[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: c}
		if sp.cfg.onCommit != nil {
			sp.cfg.onCommit(k.topic, k.partition, c)
		}
	}
	sp.mu.Unlock()
	if len(offs) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, sp.cfg.commitTimeout)
	defer cancel()
	var errs []error
	sp.cl.CommitOffsetsSync(cctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			errs = append(errs, err)
			clear(offs) // nothing was committed: retried at the next commit
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					errs = append(errs, fmt.Errorf("%s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode))
					delete(offs[t.Topic], p.Partition)
				}
			}
		}
	})
	if err := errors.Join(errs...); err != nil && len(offs) == 0 {
		return fmt.Errorf("kafka spout: commit for group %q: %w", sp.cfg.group, err)
	}
	sp.mu.Lock()
	for t, ps := range offs {
		for p, eo := range ps {
			if st := parts[tp{t, p}]; st != nil && eo.Offset > st.committed {
				st.committed = eo.Offset
			}
		}
	}
	sp.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kafka spout: commit for group %q: %w", sp.cfg.group, err)
	}
	return nil
}

// onRevoked hands revoked partitions over: nothing more is emitted from them, their
// pending trees are waited for up to the revoke wait, their acked prefix is
// committed, and they are dropped. It runs on kgo's group goroutine while no poll
// is in progress (BlockRebalanceOnPoll).
func (sp *spout) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	sp.mu.Lock()
	mine := map[tp]*partState{}
	for t, ps := range revoked {
		for _, p := range ps {
			k := tp{t, p}
			if st := sp.parts[k]; st != nil {
				mine[k] = st
				sp.buffered -= len(st.buf)
				st.buf = nil
			}
		}
	}
	timer := time.NewTimer(sp.cfg.revokeWait)
	defer timer.Stop()
	for !sp.closing {
		pending := 0
		for _, st := range mine {
			pending += st.tr.inflight()
		}
		if pending == 0 {
			break
		}
		ch := sp.changed
		sp.mu.Unlock()
		expired := false
		select {
		case <-ch:
		case <-sp.closed:
		case <-timer.C:
			expired = true
		}
		sp.mu.Lock()
		if expired {
			sp.log.Warn("kafka spout: revoke wait over with trees pending; the next owner replays them", "wait", sp.cfg.revokeWait)
			break
		}
	}
	sp.mu.Unlock()
	if err := sp.commit(ctx, mine); err != nil {
		sp.log.Warn("kafka spout: commit on revoke failed; the next owner replays from the last commit", "err", err)
	}
	sp.drop(mine)
}

// onLost drops partitions the group took away without a revoke (a fatal group
// error): committing them would be fenced, so the next owner replays from the last
// commit.
func (sp *spout) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	mine := map[tp]*partState{}
	sp.mu.Lock()
	for t, ps := range lost {
		for _, p := range ps {
			if st := sp.parts[tp{t, p}]; st != nil {
				mine[tp{t, p}] = st
			}
		}
	}
	sp.mu.Unlock()
	sp.drop(mine)
}

func (sp *spout) drop(parts map[tp]*partState) {
	if len(parts) == 0 {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for k, st := range parts {
		if sp.parts[k] != st {
			continue
		}
		sp.buffered -= len(st.buf)
		delete(sp.parts, k)
	}
	order := sp.order[:0]
	for _, k := range sp.order {
		if sp.parts[k] != nil {
			order = append(order, k)
		}
	}
	sp.order = order
	sp.next = 0
	sp.notifyLocked()
}

func (sp *spout) lag() []PartitionLag {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := make([]PartitionLag, 0, len(sp.parts))
	for k, ps := range sp.parts {
		c := ps.committed
		if c < 0 {
			c = ps.tr.start
		}
		if c < 0 {
			continue
		}
		out = append(out, PartitionLag{Topic: k.topic, Partition: k.partition, HighWatermark: ps.hw, Committed: c, Lag: max(ps.hw-c, 0)})
	}
	return out
}
