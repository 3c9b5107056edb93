package transporttest

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/gale-stream/gale/transport"
)

// Faulty wraps a transport and breaks it on purpose: it serialises every message,
// drops, duplicates and reorders a given fraction of them. It is for tests: run the
// conformance suite (and the engine) on it to see that the protocol above the
// transport survives what the transport is allowed to do.
//
// Faults apply to messages for endpoints registered through the Faulty; a message for
// any other endpoint goes straight to the inner transport (so that an unknown
// endpoint is still an error), and so does every message after Close.
//
// Randomness comes from one generator seeded by Seed (1 by default): one goroutine
// sending the same messages sees the same faults every run. Senders on several
// goroutines interleave their draws as the scheduler has them.
//
// A Faulty is safe for concurrent use. It holds its lock while it hands messages to
// the inner transport, whose Send never blocks.
type Faulty struct {
	inner transport.Transport

	clone      func(*transport.Message) (*transport.Message, error)
	drop       float64
	dropKinds  map[transport.Kind]bool // nil: every kind
	dup        float64
	reorder    float64
	window     int
	seed       uint64
	seedIsSet  bool
	mu         sync.Mutex
	rng        *rand.Rand
	endpoints  map[int]bool
	held       map[int][]*heldMsg // by endpoint, in the order held
	closed     bool
	stats      FaultStats
	lastError  string
	innerAtErr uint64 // inner Errors when lastError was set
}

type heldMsg struct {
	m    *transport.Message
	left int // sends to its endpoint still to pass before it goes
}

// FaultStats counts what a Faulty did.
type FaultStats struct {
	// Sent is the messages given to Send.
	Sent uint64
	// Dropped is the messages dropped on purpose, and those held at Close.
	Dropped uint64
	// Duplicated is the extra copies sent.
	Duplicated uint64
	// Reordered is the messages held back, to be released after later ones.
	Reordered uint64
	// SerializeErrors is the messages the clone function refused.
	SerializeErrors uint64
}

// FaultOption configures a Faulty.
type FaultOption func(*Faulty)

// Serialize makes every message cross clone (an encode and decode, such as
// codec.Clone) before it is delivered, so that no pointer is shared between sender and
// receiver. A clone error is counted in Stats (Errors, LastError) and returned by
// Send.
func Serialize(clone func(*transport.Message) (*transport.Message, error)) FaultOption {
	return func(f *Faulty) { f.clone = clone }
}

// Drop loses the fraction (0 to 1) of messages of the given kinds (every kind if none
// is given).
func Drop(fraction float64, kinds ...transport.Kind) FaultOption {
	return func(f *Faulty) {
		f.drop = fraction
		f.dropKinds = nil
		if len(kinds) > 0 {
			f.dropKinds = map[transport.Kind]bool{}
			for _, k := range kinds {
				f.dropKinds[k] = true
			}
		}
	}
}

// Duplicate delivers the fraction of messages twice (the copy cloned again when
// Serialize is set, else a copy of the Message sharing its slices).
func Duplicate(fraction float64) FaultOption { return func(f *Faulty) { f.dup = fraction } }

// Reorder holds back the fraction of messages and releases each after 1 to window
// later sends to the same endpoint (drawn at random), so that it arrives after them.
//
// A held message waits for those sends: if nothing more is sent to its endpoint, it
// waits until Flush (or is dropped at Close). Liveness then rests on the protocol's
// periodic messages, as it does under loss: a producer waiting for credit probes its
// consumer every tick, and the consumer answers; a producer re-sends End until its
// consumer acknowledges it. Each of those is a send to the endpoint that a held
// message waits at.
func Reorder(fraction float64, window int) FaultOption {
	return func(f *Faulty) { f.reorder, f.window = fraction, max(window, 1) }
}

// Seed seeds the Faulty's random faults (default 1).
func Seed(seed int64) FaultOption {
	return func(f *Faulty) { f.seed, f.seedIsSet = uint64(seed), true }
}

// NewFaulty wraps inner.
func NewFaulty(inner transport.Transport, opts ...FaultOption) *Faulty {
	f := &Faulty{inner: inner, window: 1, endpoints: map[int]bool{}, held: map[int][]*heldMsg{}}
	for _, o := range opts {
		o(f)
	}
	if !f.seedIsSet {
		f.seed = 1
	}
	f.rng = rand.New(rand.NewPCG(f.seed, 0x9e3779b97f4a7c15))
	return f
}

// Register implements transport.Transport.
func (f *Faulty) Register(endpoint int) (transport.Inbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.inner.Register(endpoint)
	if err == nil {
		f.endpoints[endpoint] = true
	}
	return in, err
}

// Unregister implements transport.Transport; messages held for the endpoint are
// dropped (counted).
func (f *Faulty) Unregister(endpoint int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inner.Unregister(endpoint)
	delete(f.endpoints, endpoint)
	f.stats.Dropped += uint64(len(f.held[endpoint]))
	delete(f.held, endpoint)
}

// Send implements transport.Transport: m is cloned (Serialize), then maybe dropped,
// duplicated or held back; then the messages held for m.To that have waited long
// enough follow it.
func (f *Faulty) Send(m *transport.Message) error {
	// The codec runs outside the lock: senders on many goroutines serialise in
	// parallel, as they would in their own processes.
	var out *transport.Message
	var cloneErr error
	if f.clone != nil {
		out, cloneErr = f.clone(m)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Sent++
	if f.closed || !f.endpoints[m.To] {
		return f.inner.Send(m)
	}
	if f.clone == nil {
		out = m
	} else if cloneErr != nil {
		return f.cloneFailed(m, cloneErr)
	}
	err := f.deliver(m, out)
	f.release(m.To)
	return err
}

// deliver sends out (m's clone) or its copies on, or holds or drops it (f.mu held).
func (f *Faulty) deliver(m, out *transport.Message) error {
	if f.drop > 0 && (f.dropKinds == nil || f.dropKinds[m.Kind]) && f.rng.Float64() < f.drop {
		f.stats.Dropped++
		return nil
	}
	copies := []*transport.Message{out}
	if f.dup > 0 && f.rng.Float64() < f.dup {
		c, err := f.cloneOf(m)
		if err != nil {
			return err
		}
		if c == m {
			cp := *m
			c = &cp
		}
		copies = append(copies, c)
		f.stats.Duplicated++
	}
	var first error
	for _, c := range copies {
		if f.reorder > 0 && f.rng.Float64() < f.reorder {
			// left+1: the release that follows this very send does not count.
			f.held[m.To] = append(f.held[m.To], &heldMsg{m: c, left: 2 + f.rng.IntN(f.window)})
			f.stats.Reordered++
			continue
		}
		if err := f.inner.Send(c); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (f *Faulty) cloneOf(m *transport.Message) (*transport.Message, error) {
	if f.clone == nil {
		return m, nil
	}
	c, err := f.clone(m)
	if err != nil {
		return nil, f.cloneFailed(m, err)
	}
	return c, nil
}

// cloneFailed counts a message the codec refused and returns the error (f.mu held).
func (f *Faulty) cloneFailed(m *transport.Message, err error) error {
	f.stats.SerializeErrors++
	f.lastError = err.Error()
	f.innerAtErr = f.inner.Stats().Errors
	return fmt.Errorf("transporttest: serialise %s from %d to %d: %w", m.Kind, m.From, m.To, err)
}

// release counts one send to endpoint against its held messages, and sends on those
// whose wait is over, in the order they were held.
func (f *Faulty) release(endpoint int) {
	hs := f.held[endpoint]
	keep := hs[:0]
	for _, h := range hs {
		if h.left--; h.left > 0 {
			keep = append(keep, h)
			continue
		}
		_ = f.inner.Send(h.m) // an error is counted by the inner transport
	}
	clear(hs[len(keep):])
	if len(keep) == 0 {
		delete(f.held, endpoint)
	} else {
		f.held[endpoint] = keep
	}
}

// Flush sends on every held message, now.
func (f *Faulty) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ep, hs := range f.held {
		for _, h := range hs {
			_ = f.inner.Send(h.m)
		}
		delete(f.held, ep)
	}
}

// Held is the number of messages held back.
func (f *Faulty) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, hs := range f.held {
		n += len(hs)
	}
	return n
}

// Faults returns what the Faulty did.
func (f *Faulty) Faults() FaultStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// Features implements transport.Transport: the inner transport's promises, less those
// the configured faults break, and Serializing when Serialize is set.
func (f *Faulty) Features() transport.Features {
	ft := f.inner.Features()
	if f.drop > 0 {
		ft.Lossless = false
	}
	if f.dup > 0 {
		ft.NoDuplicates = false
	}
	if f.reorder > 0 {
		ft.Ordered = false
	}
	if f.clone != nil {
		ft.Serializing = true
	}
	return ft
}

// Stats implements transport.Transport: the inner transport's counters, with Sent the
// messages given to this Send, Dropped adding the faults' drops, and Errors adding the
// clone's refusals (LastError is the newest of either).
func (f *Faulty) Stats() transport.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.inner.Stats()
	innerErrors := s.Errors
	s.Sent = f.stats.Sent
	s.Dropped += f.stats.Dropped
	s.Errors += f.stats.SerializeErrors
	if f.lastError != "" && innerErrors == f.innerAtErr {
		s.LastError = f.lastError
	}
	return s
}

// Close implements transport.Transport: held messages are dropped, and the inner
// transport closed.
func (f *Faulty) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for ep, hs := range f.held {
		f.stats.Dropped += uint64(len(hs))
		delete(f.held, ep)
	}
	return f.inner.Close()
}

var _ transport.Transport = (*Faulty)(nil)
