// Package flow is the protocol gale's engine speaks above a transport: credit-based
// flow control per edge, end of stream per edge, duplicate suppression per link, and
// re-sends of what must not be lost. Each piece is a pure state machine (no
// goroutines, clock reads or I/O; time comes in as an argument), in the style of
// etcd-io/raft, so that its behaviour under loss, duplication and reordering is
// tested by replaying scripts.
//
// # Credits
//
// An edge is one producing task and one consuming task. Its position is the number
// of tuples the producer has sent on it. The consumer grants credit: the position
// the producer may send up to. The producer never learns the consumer's queue
// length; it only compares its position with the credit (Sender.CanSend). Credit
// is cumulative, so a lost grant is replaced by the next.
//
// The consumer computes credit as highest - queued + window, where highest is the
// largest position it has heard of on the edge (from a batch, or from a probe) and
// queued the tuples of the edge it holds and has not executed. A batch that was lost
// is thereby written off as soon as a later batch or a probe names a position past
// it, so loss never shrinks an edge's window for good. It grants again once the
// credit has grown by half a window, or when its queue for the edge runs empty.
//
// A producer without credit sends a probe (its position) every tick; a probe is
// always answered with the current credit. So a lost grant, a lost batch or a lost
// probe delays the edge by a tick, and never deadlocks it.
//
// # End of stream
//
// A producer that exits sends End(position) on every edge it has, and re-sends it
// every tick until the consumer acknowledges it (Resender). The consumer's input
// ends when every one of its producers has ended.
//
// # Duplicates
//
// Every message on a link (one endpoint to another) carries the sender's epoch and a
// sequence number; Dedupe drops a message seen before, or too old to tell.
package flow

// Window is the room, in tuples, a consumer grants each of its producers: its
// receive queue shared among them, and never less than one batch.
func Window(receiveQueue, batchSize, producers int) uint64 {
	return uint64(max(batchSize, receiveQueue/max(producers, 1), 1))
}

// Sender is the producing side of one edge.
type Sender struct {
	pos, credit uint64
}

// NewSender returns a sender with the initial window as credit: both sides compute
// the window from the topology, so the first batches need no round trip.
func NewSender(window uint64) Sender { return Sender{credit: window} }

// CanSend reports whether the edge has credit left: one tuple of credit lets a whole
// batch go (a batch larger than the window must not stall the edge for good).
func (s *Sender) CanSend() bool { return s.pos < s.credit }

// Sent records a batch of n tuples sent and returns the edge's new position, to be
// carried by the batch.
func (s *Sender) Sent(n int) uint64 {
	s.pos += uint64(n)
	return s.pos
}

// Pos is the edge's position: tuples sent so far.
func (s *Sender) Pos() uint64 { return s.pos }

// Credit applies a grant and reports whether it let the sender go on.
func (s *Sender) Credit(limit uint64) bool {
	was := s.CanSend()
	if limit > s.credit {
		s.credit = limit
	}
	return !was && s.CanSend()
}

// Limit is the credit granted so far.
func (s *Sender) Limit() uint64 { return s.credit }

// Receiver is the consuming side of one edge.
type Receiver struct {
	window, highest, queued, granted uint64
	ended                            bool
	endPos                           uint64
}

// NewReceiver returns a receiver whose initial grant is the window (as NewSender).
func NewReceiver(window uint64) Receiver { return Receiver{window: window, granted: window} }

// Received records a batch of n tuples whose position after it is pos.
func (r *Receiver) Received(pos uint64, n int) {
	r.highest = max(r.highest, pos)
	r.queued += uint64(n)
}

// credit is what the receiver can grant now.
func (r *Receiver) credit() uint64 {
	return max(r.highest, r.queued) - r.queued + r.window
}

// Consumed records n tuples of the edge taken for execution, and returns a grant to
// send when one is due.
func (r *Receiver) Consumed(n int) (limit uint64, grant bool) {
	r.queued -= min(uint64(n), r.queued)
	c := r.credit()
	if c > r.granted && (c-r.granted >= max(r.window/2, 1) || r.queued == 0) {
		r.granted = c
		return c, true
	}
	return 0, false
}

// Probe records a producer's probe at position pos and returns the credit to answer
// with (always: the producer waits for it).
func (r *Receiver) Probe(pos uint64) uint64 {
	r.highest = max(r.highest, pos)
	r.granted = max(r.granted, r.credit())
	return r.granted
}

// End records the producer's end of stream at position pos.
func (r *Receiver) End(pos uint64) {
	r.ended = true
	r.endPos = pos
	r.highest = max(r.highest, pos)
}

// Ended reports whether the producer has ended the edge.
func (r *Receiver) Ended() bool { return r.ended }

// Queued is the edge's tuples held and not yet consumed.
func (r *Receiver) Queued() uint64 { return r.queued }

// Granted is the credit granted so far.
func (r *Receiver) Granted() uint64 { return r.granted }

// DedupeWindow is how many sequence numbers behind the newest a link remembers:
// an older message is dropped (as lost) because it cannot be told from a duplicate.
const DedupeWindow = 1024

// RetiredEpochs is how many of a link's earlier epochs a Dedupe remembers.
const RetiredEpochs = 4

// Dedupe drops duplicate messages on one link.
type Dedupe struct {
	epoch, top uint64
	seen       [DedupeWindow / 64]uint64 // bit seq%DedupeWindow: seq seen (within the window)
	// retired are the link's earlier epochs, newest first (0: none). A message of a
	// retired epoch arrives late or twice from a sender that has since restarted.
	retired [RetiredEpochs]uint64
}

// Accept reports whether the message (epoch, seq) is new. A new epoch (the sender
// restarted) starts the link afresh; a message of one of the link's last
// RetiredEpochs epochs (a straggler from before the restart) is dropped, as lost, so
// that it cannot start the link afresh again and let the new epoch's messages in
// twice. Sequence numbers start at 1.
func (d *Dedupe) Accept(epoch, seq uint64) bool {
	if seq == 0 {
		return false
	}
	if epoch != d.epoch {
		for _, e := range d.retired {
			if e == epoch && e != 0 {
				return false
			}
		}
		retired := d.retired
		if d.top != 0 {
			copy(retired[1:], retired[:])
			retired[0] = d.epoch
		}
		*d = Dedupe{epoch: epoch, retired: retired}
	}
	switch {
	case seq > d.top:
		// Forget the positions the window slides past.
		if seq-d.top >= DedupeWindow {
			clear(d.seen[:])
		} else {
			for s := d.top + 1; s < seq; s++ {
				d.clearBit(s)
			}
		}
		d.top = seq
		d.setBit(seq)
		return true
	case d.top-seq >= DedupeWindow:
		return false // too old to tell
	case d.bit(seq):
		return false
	default:
		d.setBit(seq)
		return true
	}
}

func (d *Dedupe) bit(s uint64) bool { i := s % DedupeWindow; return d.seen[i/64]&(1<<(i%64)) != 0 }
func (d *Dedupe) setBit(s uint64)   { i := s % DedupeWindow; d.seen[i/64] |= 1 << (i % 64) }
func (d *Dedupe) clearBit(s uint64) { i := s % DedupeWindow; d.seen[i/64] &^= 1 << (i % 64) }

// Resender keeps messages that must arrive (ends, control requests) until they are
// acknowledged, and says which are due again. Keys are the caller's.
type Resender[K comparable] struct {
	every int64
	due   map[K]int64
}

// NewResender re-sends every interval (nanoseconds).
func NewResender[K comparable](every int64) *Resender[K] {
	return &Resender[K]{every: every, due: map[K]int64{}}
}

// Sent records that k was sent at now; it is due again an interval later.
func (r *Resender[K]) Sent(now int64, k K) { r.due[k] = now + r.every }

// Acked forgets k and reports whether it was outstanding.
func (r *Resender[K]) Acked(k K) bool {
	_, ok := r.due[k]
	delete(r.due, k)
	return ok
}

// Due appends the keys due at now to dst and marks them sent again.
func (r *Resender[K]) Due(now int64, dst []K) []K {
	for k, at := range r.due {
		if at <= now {
			dst = append(dst, k)
			r.due[k] = now + r.every
		}
	}
	return dst
}

// Outstanding is the number of keys not yet acknowledged.
func (r *Resender[K]) Outstanding() int { return len(r.due) }
