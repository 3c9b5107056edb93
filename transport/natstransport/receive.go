package natstransport

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/tuple"
)

// receiver is one registered endpoint: its two subscriptions, and the split messages
// being reassembled on its data lane.
type receiver struct {
	t         *Transport
	ep        int
	data, ctl *nats.Subscription

	// The partials are added to by the data subscription's goroutine (nats.go calls
	// one subscription's handler for one message at a time), and expired by a timer
	// and forgotten by unsubscribe, hence the mutex.
	pmu     sync.Mutex
	partial map[int]*partial // by sending endpoint
	bytes   int              // the frame bytes the partials hold
	timer   *time.Timer      // expires idle partials (armed while there are any)
	armed   bool
	stopped bool // unsubscribed: the partials were counted, none is kept
}

// partial is a split message being reassembled. A dead one lost a frame: its other
// frames are ignored, and the message was counted dropped once.
type partial struct {
	epoch, seq  uint64
	pos         uint64
	next, parts int
	tuples      []*tuple.Tuple
	bytes       int
	dead        bool
	last        time.Time // its latest frame's arrival
}

// unsubscribe ends both subscriptions, keeping their slow-consumer drops, and counts
// the split messages it was reassembling as dropped (t.mu held).
func (r *receiver) unsubscribe() {
	r.t.subDropped.Add(r.slowDrops())
	for _, s := range []*nats.Subscription{r.data, r.ctl} {
		if s != nil {
			_ = s.Unsubscribe()
		}
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.stopped = true
	for from, p := range r.partial {
		r.remove(from, p)
	}
	if r.timer != nil {
		r.timer.Stop()
	}
}

// slowDrops is the messages the client dropped on the subscriptions because their
// pending limits were reached (t.mu held).
func (r *receiver) slowDrops() uint64 {
	var n uint64
	for _, s := range []*nats.Subscription{r.data, r.ctl} {
		if s == nil {
			continue
		}
		if d, err := s.Dropped(); err == nil && d > 0 {
			n += uint64(d)
		}
	}
	return n
}

func (r *receiver) onData(msg *nats.Msg) { r.receive(msg, true) }

func (r *receiver) onControl(msg *nats.Msg) { r.receive(msg, false) }

func (r *receiver) receive(msg *nats.Msg, dataLane bool) {
	t := r.t
	src := msg.Data
	part, parts := 0, 1
	if len(src) > 0 && src[0] == fragMarker {
		if !dataLane {
			t.recvFailed(msg, fmt.Errorf("a split frame on the control lane"))
			return
		}
		p, n := binary.Uvarint(src[1:])
		q, k := 0, 0
		if n > 0 {
			var pq uint64
			pq, k = binary.Uvarint(src[1+n:])
			q = int(min(pq, 1<<31))
		}
		if n <= 0 || k <= 0 || q < 2 || p >= uint64(q) {
			t.recvFailed(msg, fmt.Errorf("a split frame with a bad header"))
			return
		}
		part, parts = int(p), q
		src = src[1+n+k:]
	}
	if t.closed.Load() {
		if part == 0 { // a split message is counted once
			t.dropped.Add(1)
		}
		return
	}
	if t.self != "" && msg.Reply == t.self {
		// Published by this Transport before the endpoint registered here: the link
		// has gone direct since, and this message would arrive after later ones.
		if part == 0 {
			t.dropped.Add(1)
		}
		return
	}
	m, err := codec.ReadMessage(src, t.streams)
	if err != nil {
		t.recvFailed(msg, err)
		return
	}
	switch {
	case m.To != r.ep:
		t.recvFailed(msg, fmt.Errorf("a message to %d on the subject of %d", m.To, r.ep))
		return
	case dataLane != (m.Kind == transport.KindTuples):
		t.recvFailed(msg, fmt.Errorf("a %s message on the wrong lane", m.Kind))
		return
	case t.exists != nil && !t.exists(m.From):
		t.recvFailed(msg, fmt.Errorf("a message from %d, not an endpoint of this topology", m.From))
		return
	}
	if dataLane {
		if m = r.assemble(m, part, parts, len(msg.Data)); m == nil {
			return
		}
	}
	t.deliver(m)
}

// Bounds of the split messages a receiver reassembles at once. The engine's credits
// bound the data in flight on each edge, so these only stop a runaway or hostile
// sender: past either, the least recently advanced partial is dropped (counted).
const maxPartials = 1024 // senders with a split message under way

var maxPartialBytes = DefaultPendingBytes // the frame bytes the partials hold

// partialIdle is how long a partial waits for its next frame before it is dropped
// (counted): the frames of one message are published together, so a partial that
// waits that long lost a frame, and nothing else of its link may come to say so.
var partialIdle = 30 * time.Second

// assemble takes a message on the data lane: a whole one (parts 1) is returned as
// it is, and one frame of a split message is added to its partial, the message
// returned once its last frame has come. Frames of one link arrive in order or not
// at all (one publisher, one subject), so a frame that is not the next one expected
// means one was lost, and so does a message of the link that is not the next frame:
// the split message is dropped (counted once), never delivered in part.
func (r *receiver) assemble(m *transport.Message, part, parts, size int) *transport.Message {
	t := r.t
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if r.stopped { // unregistered while the frame was on its way
		if part == 0 {
			t.dropped.Add(1)
		}
		return nil
	}
	p := r.partial[m.From]
	if p != nil && (parts == 1 || p.epoch != m.Epoch || p.seq != m.Seq) {
		r.remove(m.From, p) // its last frames never came
		p = nil
	}
	if parts == 1 {
		return m
	}
	now := time.Now()
	if p == nil {
		p = &partial{epoch: m.Epoch, seq: m.Seq, pos: m.Pos, parts: parts, last: now}
		if part != 0 { // its first frames never came
			p.dead = true
			t.dropped.Add(1)
		}
		r.add(m.From, p)
	}
	p.last = now
	if p.dead {
		return nil
	}
	if part != p.next || parts != p.parts || m.Pos != p.pos {
		r.kill(p)
		return nil
	}
	p.tuples = append(p.tuples, m.Tuples...)
	p.bytes += size
	r.bytes += size
	if p.next++; p.next < p.parts {
		r.bound(p)
		return nil
	}
	r.bytes -= p.bytes
	delete(r.partial, m.From)
	m.Tuples = p.tuples
	return m
}

// add keeps a new partial, within maxPartials, and arms the expiry (r.pmu held).
func (r *receiver) add(from int, p *partial) {
	if len(r.partial) >= maxPartials {
		oldest, op := 0, (*partial)(nil)
		for f, q := range r.partial {
			if op == nil || q.last.Before(op.last) {
				oldest, op = f, q
			}
		}
		r.remove(oldest, op)
	}
	r.partial[from] = p
	if !r.armed {
		r.armed = true
		if r.timer == nil {
			r.timer = time.AfterFunc(partialIdle, r.expire)
		} else {
			r.timer.Reset(partialIdle)
		}
	}
}

// bound drops the least recently advanced partials, p last, until the partials
// hold at most maxPartialBytes (r.pmu held).
func (r *receiver) bound(p *partial) {
	for r.bytes > maxPartialBytes {
		victim := p
		for _, q := range r.partial {
			if q != p && q.bytes > 0 && (victim == p || q.last.Before(victim.last)) {
				victim = q
			}
		}
		if victim.bytes == 0 {
			return
		}
		r.kill(victim)
	}
}

// kill drops a partial's message, counted, keeping it (dead) so that its other
// frames are ignored (r.pmu held).
func (r *receiver) kill(p *partial) {
	if !p.dead {
		p.dead = true
		r.t.dropped.Add(1)
	}
	r.bytes -= p.bytes
	p.tuples, p.bytes = nil, 0
}

// remove forgets a partial, counting its message dropped unless it was already
// (r.pmu held).
func (r *receiver) remove(from int, p *partial) {
	r.kill(p)
	delete(r.partial, from)
}

// expire drops the partials that waited partialIdle for a frame, and arms itself
// again for the others.
func (r *receiver) expire() {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	r.armed = false
	if r.stopped {
		return
	}
	now := time.Now()
	var next time.Duration
	for from, p := range r.partial {
		if wait := partialIdle - now.Sub(p.last); wait <= 0 {
			r.remove(from, p)
		} else if next == 0 || wait < next {
			next = wait
		}
	}
	if next > 0 {
		r.armed = true
		r.timer.Reset(next)
	}
}

// deliver hands a decoded message to its endpoint's inbox.
// Delivered is counted first, so that a receiver that has taken the message sees it
// counted.
func (t *Transport) deliver(m *transport.Message) {
	t.delivered.Add(1)
	if err := t.boxes.Send(m); err != nil {
		t.delivered.Add(^uint64(0))
		t.dropped.Add(1) // unregistered or closed since the message was received
	}
}

// recvFailed counts a frame that could not be delivered.
func (t *Transport) recvFailed(msg *nats.Msg, err error) {
	_ = t.fail(fmt.Errorf("natstransport: a frame of %d bytes on %s: %w", len(msg.Data), msg.Subject, err))
}

// notice announces an endpoint of this transport on the directory subject: "up 5
// 1f3a..." or "down -2 1f3a..." (verb, endpoint, instance in hex). Best effort: a
// notice lost to a disconnection is not sent again.
func (t *Transport) notice(verb string, ep int) {
	_ = t.nc.Publish(t.dirSubj, fmt.Appendf(nil, "%s %d %x", verb, ep, t.id))
}

// onNotice learns of another transport's endpoint coming up or going away. Notices
// from one transport arrive in the order it published them, but those of two
// transports are not ordered: a task moved from one process to another may be
// announced up by the new one before or after the old one's down arrives. So the
// directory keeps, per endpoint, the transports whose last notice of it was "up",
// whether or not it is registered here too, and an endpoint is known gone only when
// a "down" removes the last of them while it is not registered here. A "down" from
// a transport whose "up" was not heard here (this transport started after it, or
// the notice was lost) says nothing of the others: another transport this one has
// not heard of may host the endpoint, so it is not taken as final.
func (t *Transport) onNotice(msg *nats.Msg) {
	f := strings.Fields(string(msg.Data))
	var ep int
	var id uint64
	var err error
	if len(f) == 3 && (f[0] == "up" || f[0] == "down") {
		if ep, err = strconv.Atoi(f[1]); err == nil {
			id, err = strconv.ParseUint(f[2], 16, 64)
		}
	} else {
		err = fmt.Errorf("not a notice")
	}
	if err == nil && t.exists != nil && !t.exists(ep) {
		err = fmt.Errorf("endpoint %d is not an endpoint of this topology", ep)
	}
	if err != nil {
		t.recvFailed(msg, err)
		return
	}
	if id == t.id {
		return
	}
	if t.noticed != nil {
		defer t.noticed()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	hosts := t.hosts[ep]
	switch f[0] {
	case "up":
		if hosts == nil {
			hosts = map[uint64]struct{}{}
			t.hosts[ep] = hosts
		}
		hosts[id] = struct{}{}
		delete(t.gone, ep)
	case "down":
		if _, ok := hosts[id]; !ok {
			return // never heard it announced: it may not have been the only host
		}
		delete(hosts, id)
		if len(hosts) > 0 {
			return
		}
		delete(t.hosts, ep)
		if t.eps[ep] == nil {
			t.gone[ep] = fmt.Sprintf("unregistered by transport %x", id)
		}
	}
}
