package engine

import (
	"cmp"
	"log/slog"
	"slices"
	"time"
)

// A wrong topology must not be silent: what it does wrong is logged at WARN, at most
// once per component and kind per warnEvery, each line with the first error of its
// period in full and the number not logged since the line before. The kinds: a
// refused emit, each kind of misuse (the Misuse* names), a BasicBolt's error, and a
// spout's trees failing or timing out at more than treeRate a second over warnEvery.
// What was not logged when the engine stops is logged then, in one line per
// component and kind.

// warnEvery is the shortest time between two warnings of one component and kind, and
// the window over which the rate of failing trees is measured.
const warnEvery = 10 * time.Second

// treeRate is the rate, in trees a second averaged over warnEvery, above which a
// spout's trees failing or timing out are warned about: fewer are the ordinary
// failures of a working topology.
const treeRate = 10

// Kinds of warning, besides the misuse kinds.
const (
	warnRefusedEmit = "refused-emit"
	warnBoltError   = "bolt-error"
	warnTrees       = "trees-failing"
)

// warnMsg is the message of a warning of kind.
func warnMsg(kind string) string {
	switch kind {
	case warnRefusedEmit:
		return "emit refused"
	case warnBoltError:
		return "bolt returned an error: its input is failed"
	case warnTrees:
		return "trees failing or timing out at more than 10/s"
	}
	return "misuse ignored"
}

// warnKey is what warnings are limited by.
type warnKey struct{ comp, kind string }

// warnGate decides which warnings are logged: the first of a component and kind, then
// at most one per every, each told the number of that key not logged since the one
// before. It is pure: time (the runtime clock, nanoseconds) comes in as an argument;
// the caller locks.
type warnGate struct {
	every int64
	keys  map[warnKey]*warnState
}

type warnState struct {
	logged     bool
	at         int64 // when the last line was logged
	suppressed uint64
}

// pass reports whether a warning of k at now is logged and, if it is, how many of k
// were not logged since the last one that was.
func (g *warnGate) pass(k warnKey, now int64) (ok bool, suppressed uint64) {
	s := g.keys[k]
	if s == nil {
		if g.keys == nil {
			g.keys = map[warnKey]*warnState{}
		}
		s = &warnState{}
		g.keys[k] = s
	}
	if s.logged && now-s.at < g.every {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.logged, s.at, s.suppressed = true, now, 0
	return true, n
}

// warnCount is a key's warnings not logged since its last line.
type warnCount struct {
	warnKey
	n uint64
}

// unreported returns the keys with warnings not logged since their last line, by
// component and kind, and counts them as reported.
func (g *warnGate) unreported() []warnCount {
	var out []warnCount
	for k, s := range g.keys {
		if s.suppressed > 0 {
			out = append(out, warnCount{k, s.suppressed})
			s.suppressed = 0
		}
	}
	slices.SortFunc(out, func(a, b warnCount) int {
		return cmp.Or(cmp.Compare(a.comp, b.comp), cmp.Compare(a.kind, b.kind))
	})
	return out
}

// warnSecs is the number of one-second buckets in a tree watch's window.
const warnSecs = int(warnEvery / time.Second)

// maxReasons bounds the distinct reasons a bucket of a tree watch keeps: the others
// are counted together.
const maxReasons = 8

// otherReasons names the reasons past maxReasons.
const otherReasons = "(other reasons)"

// treeWatch counts a spout component's trees that failed or timed out, by second
// over the last warnEvery and by reason, and says when they come faster than
// treeRate. Pure, as warnGate.
type treeWatch struct {
	secs     [warnSecs]treeSec
	warned   bool
	lastWarn int64
}

type treeSec struct {
	sec              int64
	failed, timedOut uint64
	reasons          map[string]uint64
}

// add counts n trees that failed (or timed out) at now for reason.
func (w *treeWatch) add(now int64, reason string, timedOut bool, n uint64) {
	sec := now / int64(time.Second)
	b := &w.secs[sec%int64(warnSecs)]
	if b.sec != sec {
		b.sec, b.failed, b.timedOut = sec, 0, 0
		clear(b.reasons)
	}
	if timedOut {
		b.timedOut += n
	} else {
		b.failed += n
	}
	if b.reasons == nil {
		b.reasons = map[string]uint64{}
	}
	if _, ok := b.reasons[reason]; !ok && len(b.reasons) >= maxReasons {
		reason = otherReasons
	}
	b.reasons[reason] += n
}

// treeReport is what a tree watch's window holds.
type treeReport struct {
	failed, timedOut uint64
	reasons          []reasonCount // most first
}

type reasonCount struct {
	reason string
	n      uint64
}

// window sums the buckets of the warnEvery up to now.
func (w *treeWatch) window(now int64) treeReport {
	sec := now / int64(time.Second)
	var r treeReport
	by := map[string]uint64{}
	for i := range w.secs {
		b := &w.secs[i]
		if b.sec > sec-int64(warnSecs) && b.sec <= sec {
			r.failed += b.failed
			r.timedOut += b.timedOut
			for k, n := range b.reasons {
				by[k] += n
			}
		}
	}
	for k, n := range by {
		r.reasons = append(r.reasons, reasonCount{k, n})
	}
	slices.SortFunc(r.reasons, func(a, b reasonCount) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.reason, b.reason))
	})
	return r
}

// due reports the window when its trees came faster than treeRate and no warning was
// given in the warnEvery before now.
func (w *treeWatch) due(now int64) (treeReport, bool) {
	if w.warned && now-w.lastWarn < int64(warnEvery) {
		return treeReport{}, false
	}
	r := w.window(now)
	if r.failed+r.timedOut <= treeRate*uint64(warnSecs) {
		return treeReport{}, false
	}
	w.warned, w.lastWarn = true, now
	return r, true
}

// warn logs a warning of kind for component comp through log (the task's logger, or
// the runtime's), unless one was logged in the warnEvery before; attrs are its
// details, the first error in full among them.
func (r *Runtime) warn(log *slog.Logger, comp, kind string, attrs ...any) {
	now := r.nanotime()
	r.warns.mu.Lock()
	ok, suppressed := r.warns.gate.pass(warnKey{comp, kind}, now)
	r.warns.mu.Unlock()
	if !ok {
		return
	}
	attrs = append([]any{"kind", kind}, attrs...)
	if suppressed > 0 {
		attrs = append(attrs, "more_since_last_warning", suppressed)
	}
	log.Warn(warnMsg(kind), attrs...)
}

// flushWarnings logs, once the tasks have exited, the warnings not logged since their
// component and kind's last line.
func (r *Runtime) flushWarnings() {
	r.warns.mu.Lock()
	rest := r.warns.gate.unreported()
	r.warns.mu.Unlock()
	for _, c := range rest {
		r.log.Warn(warnMsg(c.kind)+": more since the last warning, until the stop",
			"component", c.comp, "kind", c.kind, "more_since_last_warning", c.n)
	}
}
