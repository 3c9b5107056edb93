package natstransport

import "github.com/gale-stream/gale/transport"

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
