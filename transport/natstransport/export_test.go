package natstransport

import (
	"time"

	"github.com/gale-stream/gale/transport"
)

// WithFrameDrop loses the frames of split messages for which drop returns true (the
// frame is encoded, then not published), as a lossy network would.
func WithFrameDrop(drop func(m *transport.Message, part, parts int) bool) Option {
	return func(t *Transport) { t.dropFrame = drop }
}

// WithNoticeHook calls f after each directory notice from another transport is
// handled.
func WithNoticeHook(f func()) Option { return func(t *Transport) { t.noticed = f } }

// KnowsGone reports whether Send here refuses endpoint as gone (unregistered).
func (t *Transport) KnowsGone(endpoint int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, gone := t.gone[endpoint]
	return gone
}

// Registered reports whether endpoint is registered here (its subscriptions made,
// if the connection is down then waiting in its reconnect buffer).
func (t *Transport) Registered(endpoint int) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.eps[endpoint] != nil
}

// SetPartialIdle sets how long a split message waits for its next frame, until the
// test ends.
func SetPartialIdle(t interface{ Cleanup(func()) }, d time.Duration) {
	old := partialIdle
	partialIdle = d
	t.Cleanup(func() { partialIdle = old })
}

// SetMaxPartialBytes sets the frame bytes a receiver's partials may hold, until the
// test ends.
func SetMaxPartialBytes(t interface{ Cleanup(func()) }, n int) {
	old := maxPartialBytes
	maxPartialBytes = n
	t.Cleanup(func() { maxPartialBytes = old })
}

// Partials returns the split messages endpoint's receiver holds (dead ones
// included) and the frame bytes they keep.
func (t *Transport) Partials(endpoint int) (n, bytes int) {
	t.mu.RLock()
	r := t.eps[endpoint]
	t.mu.RUnlock()
	if r == nil {
		return 0, 0
	}
	r.pmu.Lock()
	defer r.pmu.Unlock()
	return len(r.partial), r.bytes
}

// MaxPartials is the number of senders whose split messages a receiver reassembles
// at once.
const MaxPartials = maxPartials
