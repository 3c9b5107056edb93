package engine

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/gale-stream/gale/lineage"
)

// A wrong topology must not be silent: what it does wrong is logged at WARN, at most
// once per component and kind per warnEvery, each line with the first error of its
// period in full and the number not logged since the line before. The kinds: a
// refused emit, each kind of misuse (the Misuse* names), a BasicBolt's error, and a
// spout's trees failing or timing out at more than treeRate a second over warnEvery,
// or a replayed tree timing out again (its message never completes, whatever the rate).
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
	again            uint64 // of timedOut, replays that timed out again
	reasons          map[string]uint64
}

// add counts n trees that failed (or timed out) at now for reason.
func (w *treeWatch) add(now int64, reason string, timedOut bool, n uint64) {
	sec := now / int64(time.Second)
	b := w.bucket(sec)
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

// bucket readies the bucket of second sec.
func (w *treeWatch) bucket(sec int64) *treeSec {
	b := &w.secs[sec%int64(warnSecs)]
	if b.sec != sec {
		b.sec, b.failed, b.timedOut, b.again = sec, 0, 0, 0
		clear(b.reasons)
	}
	return b
}

// addAgain counts n of the timed-out trees added at now as replays that timed out
// again: a message that never completes. Any of them in the window is warned about,
// whatever the rate.
func (w *treeWatch) addAgain(now int64, n uint64) {
	w.bucket(now / int64(time.Second)).again += n
}

// treeReport is what a tree watch's window holds.
type treeReport struct {
	failed, timedOut uint64
	again            uint64        // timed out again on replay
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
			r.again += b.again
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

// due reports the window when its trees came faster than treeRate, or a replay timed
// out again, and no warning was given in the warnEvery before now.
func (w *treeWatch) due(now int64) (treeReport, bool) {
	if w.warned && now-w.lastWarn < int64(warnEvery) {
		return treeReport{}, false
	}
	r := w.window(now)
	if r.failed+r.timedOut <= treeRate*uint64(warnSecs) && r.again == 0 {
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

// treesEndedBadly counts a spout task's trees that failed or timed out (the spout's
// goroutine). Without lineage the rate is checked here; with it, after each sweep,
// once the tasks holding timed-out trees have had a chance to say so.
func (r *Runtime) treesEndedBadly(comp string, now int64, evs []treeEnd) {
	r.warns.mu.Lock()
	w := r.warns.trees[comp]
	if w == nil {
		if r.warns.trees == nil {
			r.warns.trees = map[string]*treeWatch{}
		}
		w = &treeWatch{}
		r.warns.trees[comp] = w
	}
	for _, ev := range evs {
		w.add(now, ev.reason, ev.timedOut, 1)
		if ev.again {
			w.addAgain(now, 1)
		}
	}
	r.warns.mu.Unlock()
	if r.lin == nil {
		r.checkTrees()
	}
}

// treeEnd is a tree that failed or timed out.
type treeEnd struct {
	reason   string
	timedOut bool
	again    bool // timed out, as its message id's tree had before with no ack since
}

// checkTrees warns about each spout component whose trees fail or time out faster
// than treeRate.
func (r *Runtime) checkTrees() {
	now := r.nanotime()
	type due struct {
		comp string
		rep  treeReport
	}
	var dues []due
	r.warns.mu.Lock()
	for comp, w := range r.warns.trees {
		if rep, ok := w.due(now); ok {
			dues = append(dues, due{comp, rep})
		}
	}
	r.warns.mu.Unlock()
	for _, d := range dues {
		r.warnTrees(d.comp, d.rep)
	}
}

// maxReasonsLogged bounds the reasons a line lists, most frequent first.
const maxReasonsLogged = 5

// warnTrees logs a spout component's failing trees: how many in the window, by
// reason, and with lineage the components that failed them and those holding the
// timed-out ones (from the newest of its trees the recorder kept).
func (r *Runtime) warnTrees(comp string, rep treeReport) {
	var reasons []string
	for i, rc := range rep.reasons {
		if i == maxReasonsLogged {
			reasons = append(reasons, fmt.Sprintf("%d more reasons", len(rep.reasons)-i))
			break
		}
		reason := rc.reason
		if reason == "" {
			reason = "failed with no reason (FailWith gives one)"
		}
		reasons = append(reasons, fmt.Sprintf("%s (%d)", lineage.ClipReason(reason), rc.n))
	}
	attrs := []any{"component", comp, "kind", warnTrees,
		"in_last_10s", rep.failed + rep.timedOut, "failed", rep.failed, "timed_out", rep.timedOut,
		"reasons", strings.Join(reasons, "; ")}
	if r.lin == nil {
		what := "holds them"
		if rep.timedOut == 0 {
			what = "failed them"
		}
		attrs = append(attrs, "lineage", "off: start the engine with engine.WithLineage (gale wordcount: --ui or --log-level debug) to see which component "+what)
	} else {
		if rep.failed > 0 {
			attrs = append(attrs, "failed_by", r.linComponents(comp, lineage.Failed))
		}
		if rep.timedOut > 0 {
			attrs = append(attrs, "held_by", r.linComponents(comp, lineage.TimedOut))
		}
	}
	msg := warnMsg(warnTrees)
	if rep.again > 0 {
		attrs = append(attrs, "timed_out_again", rep.again)
		if rep.failed+rep.timedOut <= treeRate*uint64(warnSecs) {
			msg = "replayed trees timing out again: their messages never complete"
		}
	}
	r.log.Warn(msg, attrs...)
}

// linTrees is how many of a spout's newest failed (or timed-out) trees the lineage
// recorder is asked about for a warning.
const linTrees = 100

// linComponents names, from the newest trees of spout comp that ended with o, the
// components that failed them (Failed) or held a tuple of them (TimedOut), with how
// many tuples each, most first.
func (r *Runtime) linComponents(comp string, o lineage.Outcome) string {
	by := map[string]int{}
	trees := 0
	for _, t := range r.lin.Recent(o, linTrees) {
		if t.Spout != comp {
			continue
		}
		full, ok := r.lin.Lookup(rootAttr(t.Root))
		if !ok {
			continue
		}
		trees++
		if o == lineage.Failed {
			for _, f := range full.Fails {
				by[f.Component]++
			}
		} else {
			for _, h := range full.Holders {
				by[h.Component]++
			}
		}
	}
	if len(by) == 0 {
		if o == lineage.Failed {
			return fmt.Sprintf("no fail point recorded in the newest %d trees", trees)
		}
		return fmt.Sprintf("no task reported holding a tuple of the newest %d trees (lost in transport, or acked too late)", trees)
	}
	comps := make([]string, 0, len(by))
	for c := range by {
		comps = append(comps, c)
	}
	slices.SortFunc(comps, func(a, b string) int { return cmp.Or(cmp.Compare(by[b], by[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(comps))
	for i, c := range comps {
		parts[i] = fmt.Sprintf("%s (%d tuples)", c, by[c])
	}
	return strings.Join(parts, ", ") + fmt.Sprintf(" in the newest %d trees", trees)
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
