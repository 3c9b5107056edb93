package natstransport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/transport"
)

// DefaultPrefix is the first token of every subject when WithPrefix is not given.
const DefaultPrefix = "gale"

// MaxPrefix is the longest prefix, in bytes. Every protocol line the client sends
// (SUB, PUB) names a subject, and a NATS server closes a connection whose line is
// over its max_control_line (4 KiB by default): a bounded prefix keeps every
// subject of the package well under it.
const MaxPrefix = 256

// Default pending limits of each subscription (see WithPendingLimits): messages are
// not limited, since the engine's credits bound the data in flight per edge, and bytes
// are bounded so that a runaway sender is seen (Stats.Dropped) rather than exhausting
// memory.
const (
	DefaultPendingMsgs  = -1
	DefaultPendingBytes = 256 << 20
)

// registerFlushTimeout bounds how long Register waits for the server to confirm its
// subscriptions (a disconnected connection re-subscribes by itself when it is back).
const registerFlushTimeout = 5 * time.Second

// Transport is a transport.Transport over a NATS connection. One process (one engine)
// uses one Transport; the processes of a topology reach each other through the NATS
// server(s) under a common prefix. See the package documentation for the model.
type Transport struct {
	nc      *nats.Conn
	streams *codec.Streams
	prefix  string
	dirSubj string
	exists  func(int) bool
	ownConn bool
	direct  bool   // WithLocalDelivery
	pending [2]int // messages, bytes
	id      uint64 // this Transport's instance, in directory notices
	// self is the reply subject of what this Transport publishes with
	// WithLocalDelivery, by which it knows its own messages when they come back.
	self string
	// dropFrame, for tests, loses frame part of parts of a split message.
	dropFrame func(m *transport.Message, part, parts int) bool
	// noticed, for tests, is called after a directory notice is handled.
	noticed func()

	boxes *transport.Local // the receiving mailboxes (lane-split) of local endpoints

	mu       sync.RWMutex
	closed   atomic.Bool
	eps      map[int]*receiver           // endpoints registered here
	hosts    map[int]map[uint64]struct{} // endpoint -> other transports that announced it up, not down since
	gone     map[int]string              // endpoints known unregistered, and by whom
	dirSub   *nats.Subscription
	subjects sync.Map // endpoint -> *[2]string (data, control)

	splitMu sync.Mutex // the frames of one split message go out together
	bufs    sync.Pool  // *[]byte encoding buffers

	sent, delivered, dropped, errs atomic.Uint64
	subDropped                     atomic.Uint64 // slow-consumer drops of subscriptions gone
	errMu                          sync.Mutex
	lastErr                        string
}

// Option configures a Transport.
type Option func(*Transport)

// WithPrefix puts every subject under prefix (default "gale"): the transports of one
// topology share a prefix, and topologies (or tests) sharing a server use distinct
// ones. It is one or more subject tokens separated by dots, without wildcards or
// white space, of at most MaxPrefix bytes.
func WithPrefix(prefix string) Option { return func(t *Transport) { t.prefix = prefix } }

// WithEndpoints says which endpoints exist in the topology, wherever they are hosted:
// Send to any other endpoint fails with transport.ErrUnknownEndpoint, and a message
// received from any other, or a directory notice of one, is refused (counted in
// Stats.Errors). It is called on every Send to an endpoint not registered here and
// on every message received, so it must be fast and safe for concurrent use.
// Endpoints(tasks, hosts) makes the usual one.
//
// Without it, any endpoint not registered here may be hosted by another process: a
// message to an endpoint that exists nowhere is published, and core NATS drops it
// unseen (a publisher cannot tell that nobody subscribes), so nothing counts it.
func WithEndpoints(exists func(endpoint int) bool) Option {
	return func(t *Transport) { t.exists = exists }
}

// Endpoints returns the endpoints of a topology of tasks 1..tasks (spouts, bolts and
// ackers, as engine.TaskIDs numbers them) run by hosts 1..hosts, for WithEndpoints.
func Endpoints(tasks, hosts int) func(endpoint int) bool {
	return func(ep int) bool { return (ep >= 1 && ep <= tasks) || (ep <= -1 && -ep <= hosts) }
}

// WithPendingLimits sets each subscription's pending limits (nats.Subscription's
// SetPendingLimits; -1 is no limit): a message that arrives past them is dropped by
// the client as a slow consumer, and counted in Stats.Dropped. Defaults:
// DefaultPendingMsgs, DefaultPendingBytes.
func WithPendingLimits(msgs, bytes int) Option {
	return func(t *Transport) { t.pending = [2]int{msgs, bytes} }
}

// WithOwnedConn makes Close close the connection too. Without it the caller owns the
// connection, and Close only unsubscribes.
func WithOwnedConn() Option { return func(t *Transport) { t.ownConn = true } }

// WithLocalDelivery hands a message for an endpoint registered on this Transport
// straight to its inbox, without the codec or the server, as transport.Local does:
// the tasks of one process talk as in local mode, and only messages between
// processes cross NATS. Features then no longer promise Serializing (pointers are
// shared within the process).
//
// A link's path changes when its destination registers here: what this Transport
// published to it before (in flight through the server, or in nats.go's reconnect
// buffer, which is sent after the subscriptions when the connection is back) would
// arrive after messages handed over directly since. So what this Transport publishes
// carries its instance as the reply subject, and a message of its own that comes
// back to an endpoint registered here is dropped (counted in Stats.Dropped): each
// lane of a link stays in order (Ordered), and the protocol recovers the loss.
func WithLocalDelivery() Option { return func(t *Transport) { t.direct = true } }

// New returns a transport over nc whose messages are encoded with streams (made by
// codec.NewStreams from the topology every process runs).
func New(nc *nats.Conn, streams *codec.Streams, opts ...Option) (*Transport, error) {
	if nc == nil {
		return nil, errors.New("natstransport: nil connection")
	}
	if nc.IsClosed() {
		return nil, errors.New("natstransport: the connection is closed")
	}
	if streams == nil {
		return nil, errors.New("natstransport: nil stream table (codec.NewStreams of the topology)")
	}
	t := &Transport{
		nc: nc, streams: streams, prefix: DefaultPrefix,
		pending: [2]int{DefaultPendingMsgs, DefaultPendingBytes},
		id:      rand.Uint64() | 1,
		boxes:   transport.NewLocal(),
		eps:     map[int]*receiver{}, hosts: map[int]map[uint64]struct{}{}, gone: map[int]string{},
	}
	t.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	for _, o := range opts {
		o(t)
	}
	if err := checkPrefix(t.prefix); err != nil {
		return nil, err
	}
	t.dirSubj = t.prefix + ".dir"
	if t.direct {
		t.self = t.prefix + ".tr." + strconv.FormatUint(t.id, 16)
	}
	sub, err := nc.Subscribe(t.dirSubj, t.onNotice)
	if err != nil {
		return nil, fmt.Errorf("natstransport: subscribe to %s: %w", t.dirSubj, err)
	}
	t.dirSub = sub
	// As in Register: the directory hears every notice published after New returns.
	// A connection that is down subscribes when it is back; one that the server
	// closed on the subscription (or that closed meanwhile) is no transport.
	if err := nc.FlushTimeout(registerFlushTimeout); err != nil && nc.IsClosed() {
		if last := nc.LastError(); last != nil {
			err = last
		}
		return nil, fmt.Errorf("natstransport: subscribe to %s: the connection closed: %w", t.dirSubj, err)
	}
	return t, nil
}

func checkPrefix(p string) error {
	if p == "" {
		return errors.New("natstransport: empty prefix")
	}
	if len(p) > MaxPrefix {
		return fmt.Errorf("natstransport: prefix of %d bytes, over MaxPrefix (%d): a subject must fit the server's max_control_line", len(p), MaxPrefix)
	}
	for tok := range strings.SplitSeq(p, ".") {
		if tok == "" || strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Errorf("natstransport: prefix %q: each dot-separated token must be non-empty, without wildcards or white space", p)
		}
	}
	return nil
}

// Prefix returns the subject prefix.
func (t *Transport) Prefix() string { return t.prefix }

// Subjects returns the subjects of an endpoint: its data lane (KindTuples) and its
// control lane (every other kind).
func (t *Transport) Subjects(endpoint int) (data, control string) {
	s := t.subjectsOf(endpoint)
	return s[0], s[1]
}

func (t *Transport) subjectsOf(ep int) *[2]string {
	if s, ok := t.subjects.Load(ep); ok {
		return s.(*[2]string)
	}
	tok := strconv.Itoa(ep)
	if ep < 0 {
		tok = "h" + strconv.Itoa(-ep)
	}
	base := t.prefix + ".ep." + tok
	s := &[2]string{base + ".d", base + ".c"}
	actual, _ := t.subjects.LoadOrStore(ep, s)
	return actual.(*[2]string)
}

// fail counts an error and returns it.
func (t *Transport) fail(err error) error {
	t.errs.Add(1)
	t.errMu.Lock()
	t.lastErr = err.Error()
	t.errMu.Unlock()
	return err
}

// Register implements transport.Transport: it subscribes to the endpoint's two
// subjects, waits (a bounded time) for the server to have them, and announces the
// endpoint to the other transports on the prefix.
func (t *Transport) Register(endpoint int) (transport.Inbox, error) {
	t.mu.Lock()
	if t.closed.Load() {
		t.mu.Unlock()
		return nil, transport.ErrClosed
	}
	in, err := t.boxes.Register(endpoint)
	if err != nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("natstransport: %w", err)
	}
	r := &receiver{t: t, ep: endpoint, partial: map[int]*partial{}}
	subj := t.subjectsOf(endpoint)
	if r.data, err = t.nc.Subscribe(subj[0], r.onData); err == nil {
		r.ctl, err = t.nc.Subscribe(subj[1], r.onControl)
	}
	if err == nil {
		err = r.data.SetPendingLimits(t.pending[0], t.pending[1])
	}
	if err == nil {
		err = r.ctl.SetPendingLimits(t.pending[0], t.pending[1])
	}
	if err != nil {
		r.unsubscribe()
		t.boxes.Unregister(endpoint)
		t.mu.Unlock()
		return nil, t.fail(fmt.Errorf("natstransport: register endpoint %d: %w", endpoint, err))
	}
	t.eps[endpoint] = r
	delete(t.gone, endpoint)
	t.mu.Unlock()
	// The subscriptions precede anything this connection publishes later; the flush
	// makes them effective for other connections to this server too. A connection
	// that is down re-subscribes when it is back: the endpoint is registered anyway.
	_ = t.nc.FlushTimeout(registerFlushTimeout)
	t.notice("up", endpoint)
	return in, nil
}

// Unregister implements transport.Transport: it unsubscribes and announces that the
// endpoint is gone. Here, Send to it fails at once, unless another transport has
// announced it since (a task handed over to another process: Send goes on
// publishing to it); other transports learn it from the notice (see the package
// documentation).
func (t *Transport) Unregister(endpoint int) {
	t.mu.Lock()
	r := t.eps[endpoint]
	if r == nil {
		t.mu.Unlock()
		return
	}
	delete(t.eps, endpoint)
	if len(t.hosts[endpoint]) == 0 {
		t.gone[endpoint] = "unregistered here"
	}
	r.unsubscribe()
	t.boxes.Unregister(endpoint)
	closed := t.closed.Load()
	t.mu.Unlock()
	if !closed {
		t.notice("down", endpoint)
	}
}

// Send implements transport.Transport: m is encoded (codec.AppendMessage) and
// published on its destination's subject for its lane, split into frames when it is a
// KindTuples message over the server's max_payload. It does not wait for credit or a
// consumer; nats.go's Publish only buffers it (writing to the socket when its buffer
// is full, as TCP lets it).
func (t *Transport) Send(m *transport.Message) error {
	t.sent.Add(1)
	local, err := t.route(m)
	if err != nil {
		return t.fail(err)
	}
	if !local && t.exists != nil && !t.exists(m.To) {
		return t.fail(fmt.Errorf("%w %d (%s from %d): not an endpoint of this topology", transport.ErrUnknownEndpoint, m.To, m.Kind, m.From))
	}
	if !local && t.direct {
		// The destination may have registered here while exists ran: look again, so
		// that the link goes direct from now on. What was published before it did is
		// dropped when it comes back (see WithLocalDelivery).
		if local, err = t.route(m); err != nil {
			return t.fail(err)
		}
	}
	if local && t.direct {
		t.delivered.Add(1)
		if err := t.boxes.Send(m); err != nil { // unregistered or closed since route looked
			t.delivered.Add(^uint64(0))
			return t.fail(fmt.Errorf("natstransport: deliver %s from %d to %d here: %w", m.Kind, m.From, m.To, err))
		}
		return nil
	}
	return t.publish(m)
}

// route decides from what this transport knows where m goes: to an endpoint
// registered here (local), or published, unless the transport is closed or m's
// destination is known gone. It looks under t.mu, which Close holds to set closed
// and forget the endpoints, so a Send racing Close either finds its local endpoint
// (and delivers, or fails as closed) or fails as closed: it never publishes to an
// endpoint Close has just unsubscribed.
func (t *Transport) route(m *transport.Message) (local bool, err error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.routeLocked(m)
}

func (t *Transport) routeLocked(m *transport.Message) (local bool, err error) {
	if t.closed.Load() {
		return false, fmt.Errorf("%w: %s from %d to %d", transport.ErrClosed, m.Kind, m.From, m.To)
	}
	if _, ok := t.eps[m.To]; ok {
		return true, nil
	}
	if why, gone := t.gone[m.To]; gone {
		return false, fmt.Errorf("%w %d (%s from %d): %s", transport.ErrUnknownEndpoint, m.To, m.Kind, m.From, why)
	}
	return false, nil
}

// publish encodes m and publishes it on its destination's subject for its lane.
func (t *Transport) publish(m *transport.Message) error {
	subj := t.subjectsOf(m.To)[1]
	if m.Kind == transport.KindTuples {
		subj = t.subjectsOf(m.To)[0]
	}
	bp := t.bufs.Get().(*[]byte)
	defer t.bufs.Put(bp)
	buf, err := codec.AppendMessage((*bp)[:0], m, t.streams)
	*bp = buf[:0]
	if err != nil {
		return t.fail(fmt.Errorf("natstransport: encode %s from %d to %d: %w", m.Kind, m.From, m.To, err))
	}
	limit := int(t.nc.MaxPayload())
	if limit > 0 && len(buf) > limit {
		if m.Kind != transport.KindTuples {
			return t.fail(fmt.Errorf("natstransport: %s from %d to %d encodes to %d bytes, over the server's max_payload of %d bytes (only tuple batches are split)",
				m.Kind, m.From, m.To, len(buf), limit))
		}
		return t.sendSplit(subj, m, limit)
	}
	if err := t.pub(subj, buf); err != nil {
		return t.publishFailed(fmt.Sprintf("publish %s from %d to %d on %s", m.Kind, m.From, m.To, subj), err)
	}
	return nil
}

// pub publishes one frame, with this Transport's reply subject under
// WithLocalDelivery.
func (t *Transport) pub(subj string, frame []byte) error {
	if t.self == "" {
		return t.nc.Publish(subj, frame)
	}
	return t.nc.PublishRequest(subj, t.self, frame)
}

// publishFailed counts a failed Publish. One that failed because Close closed the
// connection (WithOwnedConn) while the Send ran is a Send after Close: ErrClosed.
func (t *Transport) publishFailed(what string, err error) error {
	if t.closed.Load() {
		return t.fail(fmt.Errorf("%w: natstransport: %s: %w", transport.ErrClosed, what, err))
	}
	return t.fail(fmt.Errorf("natstransport: %s: %w", what, err))
}

// Features implements transport.Transport. Core NATS is at most once: a slow
// consumer, a reconnect or a server restart loses messages (not Lossless); it does
// not duplicate, and it keeps the order of one publisher's messages on one subject,
// so each lane of a link is in order (Ordered; the two lanes are two subjects, and
// control may overtake data, as the contract wants; with WithLocalDelivery too, see
// it); every message crosses the codec, unless WithLocalDelivery hands those between
// endpoints of this Transport over as they are.
func (t *Transport) Features() transport.Features {
	return transport.Features{Ordered: true, Lossless: false, NoDuplicates: true, Serializing: !t.direct}
}

// Stats implements transport.Transport. Sent counts Send calls; Delivered the
// messages handed to an inbox here; Dropped the messages lost here: slow-consumer
// drops of the subscriptions, split messages missing a frame (or dropped past the
// bounds of reassembly, or left when their endpoint was unregistered), messages that
// arrived for an endpoint just unregistered or after Close, and this Transport's
// own messages that came back after their link went direct (WithLocalDelivery).
// Errors counts refused sends, frames that did not decode or claim a sender outside
// the topology, and refused directory notices (LastError names the newest).
func (t *Transport) Stats() transport.Stats {
	t.mu.RLock() // Unregister moves a subscription's drops to subDropped under t.mu
	dropped := t.dropped.Load() + t.subDropped.Load()
	for _, r := range t.eps {
		dropped += r.slowDrops()
	}
	t.mu.RUnlock()
	t.errMu.Lock()
	last := t.lastErr
	t.errMu.Unlock()
	return transport.Stats{Sent: t.sent.Load(), Delivered: t.delivered.Load(), Dropped: dropped,
		Errors: t.errs.Load(), LastError: last}
}

// Close implements transport.Transport: every subscription ends, the endpoints are
// announced gone, later Sends fail with ErrClosed, and Register fails. A Send that
// runs while Close does comes either before it (delivered here, or published) or
// after it (ErrClosed, also when the connection Close closed refuses the publish).
// The connection is closed only with WithOwnedConn.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed.Swap(true) {
		t.mu.Unlock()
		return nil
	}
	eps := make([]int, 0, len(t.eps))
	for ep, r := range t.eps {
		r.unsubscribe()
		eps = append(eps, ep)
	}
	clear(t.eps)
	if t.dirSub != nil {
		_ = t.dirSub.Unsubscribe()
	}
	t.mu.Unlock()
	_ = t.boxes.Close()
	for _, ep := range eps {
		t.notice("down", ep)
	}
	if t.ownConn {
		t.nc.Close()
		return nil
	}
	return nil
}

var _ transport.Transport = (*Transport)(nil)
