package engine

import (
	"sync"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/flow"
	"github.com/gale-stream/gale/tuple"
)

// endpoint is one hosted task's side of the protocol (package transport/flow): its
// inbox, the credit state of the edges it sends on and receives on, and the control
// messages it handles. cmu guards it and is never held while user code runs or while
// a send waits, so a task blocked waiting for credit (holding its emitter's mutex)
// and its own goroutine can both take control messages.
type endpoint struct {
	rt    *Runtime
	task  int
	inbox transport.Inbox

	cmu sync.Mutex
	// out holds the edges this task has sent on (made at the first send: memory
	// follows the destinations a task actually uses, not the topology's size).
	out map[int]*outEdge
	// in holds the edges this task has received on, and the links acker messages
	// and outcomes arrived on (for duplicate suppression).
	in map[int]*inEdge
	// links numbers the acker messages and outcomes this task sends, per destination.
	links map[int]uint64
	// credited is signalled when a grant lets a waiting send go on.
	credited chan struct{}
	// endSeen is closed when every producer task has ended its edge to this one
	// (all spout and bolt tasks, for an acker).
	endSeen chan struct{}
	// outcomes (spouts) and acks (ackers) taken from the inbox, for the task's
	// goroutine.
	outcomes []acker.Outcome
	acks     []acker.Msg
	// taken holds tuple batches taken from the inbox and not yet executed (bolts).
	taken  []*transport.Message
	ctl    []*transport.Message
	queued int // tuples in taken (for QueueDepth)
	// dupes counts tuples received twice and dropped.
	dupes uint64
}

// outEdge is the sending side of one edge: the batch being filled (guarded by the
// emitter's mutex) and the credit (guarded by cmu).
type outEdge struct {
	to    int
	batch []*tuple.Tuple
	flow  flow.Sender
	seq   uint64
	dirty bool // in the emitter's dirty list
	// stalled (guarded by cmu) is set when a send waited two message timeouts for
	// credit in vain (the consumer's host is dead or stuck): later batches on the
	// edge are dropped at once, their trees left to time out, until a grant comes.
	stalled bool
}

// inEdge is the receiving side of one link: credit for tuples, and the duplicate
// filter for every numbered kind.
type inEdge struct {
	flow   flow.Receiver
	dedupe flow.Dedupe
	made   bool // flow initialised (tuples seen on this link)
}

func newEndpoint(rt *Runtime, task int, inbox transport.Inbox) *endpoint {
	return &endpoint{
		rt: rt, task: task, inbox: inbox,
		out: map[int]*outEdge{}, in: map[int]*inEdge{}, links: map[int]uint64{},
		credited: make(chan struct{}, 1), endSeen: make(chan struct{}),
	}
}

// edgeTo returns the edge to task, making it at the first send (cmu not needed: the
// map is only touched under the emitter's mutex and read under cmu by credits, which
// look it up under cmu too; so both take cmu).
func (p *endpoint) edgeTo(task int) *outEdge {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	o := p.out[task]
	if o == nil {
		o = &outEdge{to: task, flow: flow.NewSender(p.rt.windowOf(task))}
		p.out[task] = o
	}
	return o
}

// inFrom returns the incoming link from task (cmu held).
func (p *endpoint) inFrom(task int) *inEdge {
	e := p.in[task]
	if e == nil {
		e = &inEdge{}
		p.in[task] = e
	}
	return e
}

// nextSeq numbers the next message to dest on a link that is not an edge (cmu held).
func (p *endpoint) nextSeq(dest int) uint64 {
	p.links[dest]++
	return p.links[dest]
}

// poll takes every waiting control message and handles it; with data set it also
// takes the waiting tuple batches into taken. It never blocks and runs no user code.
func (p *endpoint) poll(data bool) {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	p.ctl = p.inbox.TakeControl(p.ctl[:0])
	for i, m := range p.ctl {
		p.handle(m)
		p.ctl[i] = nil
	}
	if !data {
		return
	}
	n := len(p.taken)
	p.taken = p.inbox.TakeTuples(p.taken)
	kept := p.taken[:n]
	for _, m := range p.taken[n:] {
		in := p.inFrom(m.From)
		if !in.made {
			in.flow, in.made = flow.NewReceiver(p.rt.windowOf(p.task)), true
		}
		if !in.dedupe.Accept(m.Epoch, m.Seq) {
			p.dupes += uint64(len(m.Tuples))
			continue
		}
		in.flow.Received(m.Pos, len(m.Tuples))
		p.queued += len(m.Tuples)
		kept = append(kept, m)
	}
	clear(p.taken[len(kept):])
	p.taken = kept
}

// handle applies one control message (cmu held).
func (p *endpoint) handle(m *transport.Message) {
	rt := p.rt
	switch m.Kind {
	case transport.KindCredit:
		if o := p.out[m.From]; o != nil && (o.flow.Credit(m.Pos) || o.stalled) {
			o.stalled = false
			select {
			case p.credited <- struct{}{}:
			default:
			}
		}
	case transport.KindProbe:
		in := p.inFrom(m.From)
		if !in.made {
			in.flow, in.made = flow.NewReceiver(rt.windowOf(p.task)), true
		}
		rt.send(&transport.Message{Kind: transport.KindCredit, From: p.task, To: m.From, Pos: in.flow.Probe(m.Pos)})
	case transport.KindAcks:
		if p.inFrom(m.From).dedupe.Accept(m.Epoch, m.Seq) {
			p.acks = append(p.acks, m.Acks...)
			putAcks(m.Acks)
		}
	case transport.KindOutcomes:
		if p.inFrom(m.From).dedupe.Accept(m.Epoch, m.Seq) {
			p.outcomes = append(p.outcomes, m.Outcomes...)
			putOutcomes(m.Outcomes)
		}
	default:
		rt.countStray(m)
	}
}

// inputEnded closes endSeen: every producer has ended its edge to this task
// (host loop only).
func (p *endpoint) inputEnded() { close(p.endSeen) }

// consumed records that a batch from producer was executed, and sends a grant when
// one is due.
func (p *endpoint) consumed(m *transport.Message) {
	p.cmu.Lock()
	p.queued -= len(m.Tuples)
	in := p.in[m.From]
	limit, grant := in.flow.Consumed(len(m.Tuples))
	p.cmu.Unlock()
	if grant {
		p.rt.send(&transport.Message{Kind: transport.KindCredit, From: p.task, To: m.From, Pos: limit})
	}
}

// takeBatch returns the next batch taken and not yet executed, or nil.
func (p *endpoint) takeBatch() *transport.Message {
	p.cmu.Lock()
	defer p.cmu.Unlock()
	if len(p.taken) == 0 {
		return nil
	}
	m := p.taken[0]
	p.taken[0] = nil
	p.taken = p.taken[1:]
	if len(p.taken) == 0 {
		p.taken = p.taken[:0:0] // let the backing array go once drained
	}
	return m
}

// queueDepth is the tuples waiting for this task: in its inbox, and taken.
func (p *endpoint) queueDepth() int {
	p.cmu.Lock()
	n := p.queued
	p.cmu.Unlock()
	return n + p.inbox.Tuples()
}

// allEnded reports whether every producer has ended (always false for a task that
// has none: a spout).
func (p *endpoint) allEnded() bool {
	select {
	case <-p.endSeen:
		return true
	default:
		return false
	}
}

// Buffers of acker messages and outcomes go from sender to receiver inside a
// message; the receiver copies them out and gives them back here for the next
// send, so a task's flushes do not allocate (a new buffer per flush was 15% of word
// count's allocated bytes). Only whole buffers of at most maxPooled are kept.
var (
	ackBufs     sync.Pool // *[]acker.Msg
	outcomeBufs sync.Pool // *[]acker.Outcome
)

const maxPooled = 4096

func getAcks() []acker.Msg {
	if b, ok := ackBufs.Get().(*[]acker.Msg); ok {
		return (*b)[:0]
	}
	return make([]acker.Msg, 0, 64)
}

func putAcks(b []acker.Msg) {
	if cap(b) == 0 || cap(b) > maxPooled {
		return
	}
	clear(b) // no Reason strings kept alive
	b = b[:0]
	ackBufs.Put(&b)
}

func getOutcomes() []acker.Outcome {
	if b, ok := outcomeBufs.Get().(*[]acker.Outcome); ok {
		return (*b)[:0]
	}
	return make([]acker.Outcome, 0, 64)
}

func putOutcomes(b []acker.Outcome) {
	if cap(b) == 0 || cap(b) > maxPooled {
		return
	}
	clear(b)
	b = b[:0]
	outcomeBufs.Put(&b)
}
