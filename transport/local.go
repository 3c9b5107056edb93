package transport

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Local is the in-process transport: a mailbox per endpoint, two slices under a
// mutex (control and data) and a signal channel. It shares pointers (the tuples
// themselves), loses nothing, keeps each link's order and never duplicates.
type Local struct {
	mu     sync.RWMutex
	boxes  map[int]*mailbox
	closed bool
	stats  counters
}

// counters are Stats as atomics.
type counters struct {
	sent, delivered, dropped, errors atomic.Uint64
	mu                               sync.Mutex
	lastError                        string
}

func (c *counters) fail(err error) error {
	c.errors.Add(1)
	c.mu.Lock()
	c.lastError = err.Error()
	c.mu.Unlock()
	return err
}

func (c *counters) snapshot() Stats {
	c.mu.Lock()
	last := c.lastError
	c.mu.Unlock()
	return Stats{Sent: c.sent.Load(), Delivered: c.delivered.Load(), Dropped: c.dropped.Load(),
		Errors: c.errors.Load(), LastError: last}
}

// NewLocal returns an in-process transport.
func NewLocal() *Local { return &Local{boxes: map[int]*mailbox{}} }

// mailbox is one endpoint's Inbox.
type mailbox struct {
	signal  chan struct{}
	mu      sync.Mutex
	control []*Message
	data    []*Message
	tuples  int
}

func (b *mailbox) put(m *Message) {
	b.mu.Lock()
	if m.Kind == KindTuples {
		b.data = append(b.data, m)
		b.tuples += len(m.Tuples)
	} else {
		b.control = append(b.control, m)
	}
	b.mu.Unlock()
	select {
	case b.signal <- struct{}{}:
	default:
	}
}

func (b *mailbox) Signal() <-chan struct{} { return b.signal }

func (b *mailbox) TakeControl(dst []*Message) []*Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	dst = append(dst, b.control...)
	clear(b.control)
	b.control = b.control[:0]
	return dst
}

func (b *mailbox) TakeTuples(dst []*Message) []*Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	dst = append(dst, b.data...)
	clear(b.data)
	b.data = b.data[:0]
	b.tuples = 0
	return dst
}

func (b *mailbox) Tuples() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tuples
}

// Register implements Transport.
func (l *Local) Register(endpoint int) (Inbox, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	if l.boxes == nil {
		l.boxes = map[int]*mailbox{}
	}
	if l.boxes[endpoint] != nil {
		return nil, fmt.Errorf("transport: endpoint %d registered twice", endpoint)
	}
	b := &mailbox{signal: make(chan struct{}, 1)}
	l.boxes[endpoint] = b
	return b, nil
}

// Unregister implements Transport.
func (l *Local) Unregister(endpoint int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.boxes, endpoint)
}

// Send implements Transport.
func (l *Local) Send(m *Message) error {
	l.mu.RLock()
	b, closed := l.boxes[m.To], l.closed
	l.mu.RUnlock()
	l.stats.sent.Add(1)
	switch {
	case closed:
		return l.stats.fail(fmt.Errorf("%w: %s to %d", ErrClosed, m.Kind, m.To))
	case b == nil:
		return l.stats.fail(fmt.Errorf("%w %d (%s from %d)", ErrUnknownEndpoint, m.To, m.Kind, m.From))
	}
	b.put(m)
	l.stats.delivered.Add(1)
	return nil
}

// Features implements Transport: Local keeps every promise.
func (l *Local) Features() Features {
	return Features{Ordered: true, Lossless: true, NoDuplicates: true}
}

// Stats implements Transport.
func (l *Local) Stats() Stats { return l.stats.snapshot() }

// Close implements Transport.
func (l *Local) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}
