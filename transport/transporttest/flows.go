package transporttest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/flow"
	"github.com/gale-stream/gale/tuple"
)

// flowConfig is a set of edges, every producer to every consumer, driven by the flow
// protocol over the transport under test as the engine drives it.
type flowConfig struct {
	producers, consumers int
	tuples               int // per edge
	batch                int
	queue                int // each consumer's receive queue: window = flow.Window(queue, batch, producers)
	// slow is the index of the slow consumer (-1: none). It executes slowRate tuples
	// a tick; when gated, none at all until every other consumer has all its input.
	slow     int
	slowRate int
	gated    bool
}

// Endpoints of the flows: producers 1.., consumers 101...
func producerID(i int) int { return 1 + i }
func consumerID(i int) int { return 101 + i }

// epochOf is an endpoint's epoch.
func epochOf(ep int) uint64 { return uint64(ep)<<32 | 0x5eed }

// flowErrors collects what goroutines found wrong, for the test to report.
type flowErrors struct {
	mu   sync.Mutex
	errs []string
}

func (e *flowErrors) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.errs) < 20 {
		e.errs = append(e.errs, fmt.Sprintf(format, args...))
	}
}

// link numbers one endpoint's messages to another and drops duplicates coming back.
type link struct {
	seq   uint64
	dedup flow.Dedupe
}

// outEdge is a producer's side of one edge.
type outEdge struct {
	to        int
	snd       flow.Sender
	link      link
	remaining int
	next      int // index of the next tuple
	endSent   bool
	endAcked  bool
	probes    int
}

type producer struct {
	id    int
	tr    transport.Transport
	in    transport.Inbox
	edges map[int]*outEdge
	ends  *flow.Resender[int]
	batch int
	errs  *flowErrors
	done  chan struct{}
	start time.Time
}

func (p *producer) send(e *outEdge, m *transport.Message) {
	e.link.seq++
	m.From, m.To, m.Epoch, m.Seq = p.id, e.to, epochOf(p.id), e.link.seq
	if err := p.tr.Send(m); err != nil {
		p.errs.add("producer %d: Send(%s to %d): %v", p.id, m.Kind, e.to, err)
	}
}

func (p *producer) run(stop <-chan struct{}) {
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	var ctl []*transport.Message
	for {
		now := time.Since(p.start).Nanoseconds()
		ctl = p.in.TakeControl(ctl[:0])
		for _, m := range ctl {
			e := p.edges[m.From]
			if e == nil {
				p.errs.add("producer %d: %s from %d, not a consumer of it", p.id, m.Kind, m.From)
				continue
			}
			if !e.link.dedup.Accept(m.Epoch, m.Seq) {
				continue
			}
			switch m.Kind {
			case transport.KindCredit:
				e.snd.Credit(m.Pos)
			case transport.KindEndAck:
				if p.ends.Acked(e.to) {
					e.endAcked = true
				}
			default:
				p.errs.add("producer %d: unexpected %s from %d", p.id, m.Kind, m.From)
			}
		}
		if data := p.in.TakeTuples(nil); len(data) > 0 {
			p.errs.add("producer %d: %d batches of tuples", p.id, len(data))
		}
		finished := true
		for _, e := range p.edges {
			for e.remaining > 0 && e.snd.CanSend() {
				n := min(p.batch, e.remaining)
				ts := make([]*tuple.Tuple, n)
				for i := range ts {
					ts[i] = newTuple(SideStream, p.id, e.to, tuple.Values{int64(e.next), uint64(p.id)})
					e.next++
				}
				e.remaining -= n
				p.send(e, &transport.Message{Kind: transport.KindTuples, Pos: e.snd.Sent(n), Tuples: ts})
			}
			if e.remaining == 0 && !e.endSent {
				e.endSent = true
				p.send(e, &transport.Message{Kind: transport.KindEnd, Pos: e.snd.Pos()})
				p.ends.Sent(now, e.to)
			}
			finished = finished && e.endAcked
		}
		if finished {
			close(p.done)
			return
		}
		select {
		case <-p.in.Signal():
		case <-tick.C:
			for _, e := range p.edges {
				if e.remaining > 0 && !e.snd.CanSend() {
					e.probes++
					p.send(e, &transport.Message{Kind: transport.KindProbe, Pos: e.snd.Pos()})
				}
			}
			for _, to := range p.ends.Due(now, nil) {
				e := p.edges[to]
				p.send(e, &transport.Message{Kind: transport.KindEnd, Pos: e.snd.Pos()})
			}
		case <-stop:
			return
		}
	}
}

func (p *producer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "producer %d:", p.id)
	for _, e := range p.edges {
		fmt.Fprintf(&b, " [to %d: pos %d credit %d remaining %d probes %d end sent %v acked %v]",
			e.to, e.snd.Pos(), e.snd.Limit(), e.remaining, e.probes, e.endSent, e.endAcked)
	}
	return b.String()
}

// inEdge is a consumer's side of one edge.
type inEdge struct {
	from    int
	rcv     flow.Receiver
	link    link
	highest uint64 // the largest position heard of (batch, probe or end)
	late    uint64 // tuples that arrived after a position past them had been heard of
	got     int    // tuples accepted
	count   []int  // deliveries per tuple index
	ended   bool
	endPos  uint64
	over    uint64 // the most the receiver held over its bound
}

type heldRun struct {
	e *inEdge
	n int
}

type consumer struct {
	id       int
	tr       transport.Transport
	in       transport.Inbox
	edges    map[int]*inEdge
	window   uint64
	batch    int
	rate     int           // tuples executed per tick; 0: everything at once
	gate     chan struct{} // when not nil, execute nothing until it is closed
	lossless bool
	held     []heldRun
	errs     *flowErrors
	done     chan struct{}
	isDone   bool
}

func (c *consumer) send(e *inEdge, m *transport.Message) {
	e.link.seq++
	m.From, m.To, m.Epoch, m.Seq = c.id, e.from, epochOf(c.id), e.link.seq
	if err := c.tr.Send(m); err != nil {
		c.errs.add("consumer %d: Send(%s to %d): %v", c.id, m.Kind, e.from, err)
	}
}

func (c *consumer) heard(e *inEdge, pos uint64) { e.highest = max(e.highest, pos) }

func (c *consumer) take() {
	for _, m := range c.in.TakeControl(nil) {
		e := c.edges[m.From]
		if e == nil {
			c.errs.add("consumer %d: %s from %d, not a producer of it", c.id, m.Kind, m.From)
			continue
		}
		if !e.link.dedup.Accept(m.Epoch, m.Seq) {
			continue
		}
		switch m.Kind {
		case transport.KindProbe:
			c.heard(e, m.Pos)
			c.send(e, &transport.Message{Kind: transport.KindCredit, Pos: e.rcv.Probe(m.Pos)})
		case transport.KindEnd:
			c.heard(e, m.Pos)
			e.rcv.End(m.Pos)
			e.ended, e.endPos = true, m.Pos
			c.send(e, &transport.Message{Kind: transport.KindEndAck, Pos: m.Pos})
		default:
			c.errs.add("consumer %d: unexpected %s from %d", c.id, m.Kind, m.From)
		}
	}
	for _, m := range c.in.TakeTuples(nil) {
		e := c.edges[m.From]
		if e == nil {
			c.errs.add("consumer %d: tuples from %d, not a producer of it", c.id, m.From)
			continue
		}
		if !e.link.dedup.Accept(m.Epoch, m.Seq) {
			continue
		}
		n := len(m.Tuples)
		if m.Pos <= e.highest {
			e.late += uint64(n)
		}
		c.heard(e, m.Pos)
		e.rcv.Received(m.Pos, n)
		e.got += n
		for i, tp := range m.Tuples {
			idx, ok1 := tp.Value(0).(int64)
			from, ok2 := tp.Value(1).(uint64)
			want := int64(m.Pos) - int64(n) + int64(i)
			if !ok1 || !ok2 || int(from) != e.from || idx != want || idx < 0 || int(idx) >= len(e.count) {
				c.errs.add("consumer %d: tuple %v in batch pos %d from %d, want index %d", c.id, tp.Values(), m.Pos, e.from, want)
				continue
			}
			e.count[idx]++
		}
		c.held = append(c.held, heldRun{e, n})
		if bound := c.window + uint64(c.batch) + e.late; e.rcv.Queued() > bound {
			e.over = max(e.over, e.rcv.Queued()-bound)
		}
	}
}

// execute executes up to limit held tuples (all when limit < 0) and grants credit.
func (c *consumer) execute(limit int) {
	for len(c.held) > 0 && limit != 0 {
		r := &c.held[0]
		n := r.n
		if limit > 0 {
			n = min(n, limit)
			limit -= n
		}
		r.n -= n
		if l, ok := r.e.rcv.Consumed(n); ok {
			c.send(r.e, &transport.Message{Kind: transport.KindCredit, Pos: l})
		}
		if r.n == 0 {
			c.held = c.held[1:]
		}
	}
}

func (c *consumer) checkDone() {
	if c.isDone || len(c.held) > 0 {
		return
	}
	for _, e := range c.edges {
		if !e.ended || (c.lossless && uint64(e.got) < e.endPos) {
			return
		}
	}
	c.isDone = true
	close(c.done)
}

func (c *consumer) run(stop <-chan struct{}) {
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		c.take()
		gateOpen := c.gate == nil
		if !gateOpen {
			select {
			case <-c.gate:
				c.gate, gateOpen = nil, true
			default:
			}
		}
		if gateOpen && c.rate == 0 {
			c.execute(-1)
		}
		c.checkDone()
		select {
		case <-c.in.Signal():
		case <-tick.C:
			if gateOpen && c.rate > 0 {
				c.execute(c.rate)
			}
		case <-stop:
			return
		}
	}
}

func (c *consumer) String() string {
	var b strings.Builder
	held := 0
	for _, r := range c.held {
		held += r.n
	}
	fmt.Fprintf(&b, "consumer %d (holds %d, gated %v):", c.id, held, c.gate != nil)
	for _, e := range c.edges {
		fmt.Fprintf(&b, " [from %d: got %d queued %d granted %d late %d ended %v at %d]",
			e.from, e.got, e.rcv.Queued(), e.rcv.Granted(), e.late, e.ended, e.endPos)
	}
	return b.String()
}

// runFlows runs cfg over a transport from newT: every flow must end (every end
// acknowledged, every consumer's input ended and executed), each consumer must hold
// no more of an edge than its window, one batch and the tuples that were in flight
// when a probe or a later batch wrote them off, and, when the transport is Lossless,
// every tuple must arrive exactly once.
func runFlows(t *testing.T, newT Constructor, cfg flowConfig) {
	var eps []int
	for i := range cfg.producers {
		eps = append(eps, producerID(i))
	}
	for i := range cfg.consumers {
		eps = append(eps, consumerID(i))
	}
	tr, boxes := open(t, newT, eps...)
	f := tr.Features()
	window := flow.Window(cfg.queue, cfg.batch, cfg.producers)
	errs := &flowErrors{}
	start := time.Now()

	var producers []*producer
	var consumers []*consumer
	for i := range cfg.producers {
		p := &producer{id: producerID(i), tr: tr, in: boxes[producerID(i)], edges: map[int]*outEdge{},
			ends: flow.NewResender[int]((5 * retryEvery).Nanoseconds()), batch: cfg.batch, errs: errs,
			done: make(chan struct{}), start: start}
		for j := range cfg.consumers {
			p.edges[consumerID(j)] = &outEdge{to: consumerID(j), snd: flow.NewSender(window), remaining: cfg.tuples}
		}
		producers = append(producers, p)
	}
	fastDone := make(chan struct{})
	for j := range cfg.consumers {
		c := &consumer{id: consumerID(j), tr: tr, in: boxes[consumerID(j)], edges: map[int]*inEdge{},
			window: window, batch: cfg.batch, errs: errs, lossless: f.Lossless, done: make(chan struct{})}
		if j == cfg.slow {
			c.rate = cfg.slowRate
			if cfg.gated {
				c.gate = fastDone
			}
		}
		for i := range cfg.producers {
			c.edges[producerID(i)] = &inEdge{from: producerID(i), rcv: flow.NewReceiver(window), count: make([]int, cfg.tuples)}
		}
		consumers = append(consumers, c)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range producers {
		wg.Go(func() { p.run(stop) })
	}
	for _, c := range consumers {
		wg.Go(func() { c.run(stop) })
	}
	// The gate opens when every consumer but the slow one is done.
	wg.Go(func() {
		for j, c := range consumers {
			if j == cfg.slow {
				continue
			}
			select {
			case <-c.done:
			case <-stop:
				return
			}
		}
		close(fastDone)
	})

	deadline := time.NewTimer(Timeout)
	defer deadline.Stop()
	var stuck string
	wait := func(what string, ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-deadline.C:
			stuck = what
			return false
		}
	}
	ok := true
	for _, c := range consumers {
		if ok = wait(fmt.Sprintf("consumer %d", c.id), c.done); !ok {
			break
		}
	}
	for _, p := range producers {
		if !ok {
			break
		}
		ok = wait(fmt.Sprintf("producer %d", p.id), p.done)
	}
	close(stop)
	wg.Wait()

	var state strings.Builder
	for _, p := range producers {
		fmt.Fprintf(&state, "\n\t%v", p)
	}
	for _, c := range consumers {
		fmt.Fprintf(&state, "\n\t%v", c)
	}
	st := tr.Stats()
	fmt.Fprintf(&state, "\n\ttransport stats %+v", st)
	if !ok {
		t.Fatalf("%s stuck: not done after %v (window %d):%s", stuck, Timeout, window, state.String())
	}
	for _, e := range errs.errs {
		t.Error(e)
	}
	for _, c := range consumers {
		for _, e := range c.edges {
			if e.over > 0 {
				t.Errorf("consumer %d held %d tuples of producer %d over window %d + batch %d + late %d", c.id, e.over, e.from, window, cfg.batch, e.late)
			}
			for idx, n := range e.count {
				switch {
				case n > 1:
					t.Errorf("consumer %d: tuple %d of producer %d delivered %d times (after Dedupe)", c.id, idx, e.from, n)
				case n == 0 && f.Lossless:
					t.Errorf("consumer %d: tuple %d of producer %d never arrived, and the transport is Lossless", c.id, idx, e.from)
				}
			}
			if e.endPos != uint64(cfg.tuples) {
				t.Errorf("consumer %d: producer %d ended at %d, want %d", c.id, e.from, e.endPos, cfg.tuples)
			}
		}
	}
	if t.Failed() {
		t.Logf("state:%s", state.String())
	} else {
		t.Logf("done in %v (window %d); transport stats %+v", time.Since(start), window, st)
	}
}

// testFanIn: eight producers, one slow consumer.
func testFanIn(t *testing.T, newT Constructor) {
	runFlows(t, newT, flowConfig{producers: 8, consumers: 1, tuples: 500, batch: 8, queue: 64, slow: 0, slowRate: 32})
}

// testFanOut: one producer, eight consumers; the slow one executes nothing until the
// other seven have all their input, which they get only if its edge's backpressure
// holds back its edge alone.
func testFanOut(t *testing.T, newT Constructor) {
	runFlows(t, newT, flowConfig{producers: 1, consumers: 8, tuples: 500, batch: 8, queue: 64, slow: 3, slowRate: 32, gated: true})
}

// testLossWhereAllowed: on a transport that may lose messages, flows with the
// smallest windows (one tuple a batch) still end.
func testLossWhereAllowed(t *testing.T, newT Constructor) {
	tr := newT(t)
	lossless := tr.Features().Lossless
	_ = tr.Close()
	if lossless {
		t.Skip("Lossless: FanIn and FanOut cover it")
	}
	runFlows(t, newT, flowConfig{producers: 4, consumers: 2, tuples: 200, batch: 1, queue: 1, slow: 1, slowRate: 4})
}
