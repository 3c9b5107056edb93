package engine

import (
	"sync"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/clock"
	"github.com/gale-stream/gale/transport"
)

// ackerExec is one acker task: the pure ledger, plus the goroutine, clock and endpoint
// around it.
type ackerExec struct {
	rt       *Runtime
	task     int
	ep       *endpoint
	mu       sync.Mutex // guards ledger and rejected for Stats
	ledger   *acker.Ledger
	rejected uint64
	msgs     []acker.Msg
	// outs holds the outcomes for each spout task, made at its first outcome.
	outs  map[int][]acker.Outcome
	dirty []int
}

// ackerBuckets: one bucket more than the spout's pending map, so the acker drops a
// tree only after its spout has timed it out.
const ackerBuckets = rotationsPerTimeout + 2

func (a *ackerExec) process() {
	ep := a.ep
	ep.poll(false)
	ep.cmu.Lock()
	a.msgs, ep.acks = ep.acks, a.msgs[:0]
	ep.cmu.Unlock()
	if len(a.msgs) == 0 {
		return
	}
	now := a.rt.nanotime()
	a.mu.Lock()
	for _, m := range a.msgs {
		o, ok, err := a.ledger.Step(now, m)
		if err != nil {
			a.rejected++
			a.rt.log.Warn("acker rejected a message", "task", a.task, "err", err)
			continue
		}
		if ok {
			t := int(o.SpoutTask)
			if c := a.rt.componentOf(t); c == nil || !c.IsSpout() {
				a.rejected++
				a.rt.log.Warn("acker outcome for an unknown spout task", "task", a.task, "spout_task", t, "root", o.Root)
				continue
			}
			if len(a.outs[t]) == 0 {
				a.dirty = append(a.dirty, t)
				if a.outs[t] == nil {
					a.outs[t] = getOutcomes()
				}
			}
			a.outs[t] = append(a.outs[t], o)
		}
	}
	a.mu.Unlock()
	for _, t := range a.dirty {
		ep.cmu.Lock()
		seq := ep.nextSeq(t)
		ep.cmu.Unlock()
		a.rt.send(&transport.Message{Kind: transport.KindOutcomes, From: a.task, To: t, Seq: seq, Outcomes: a.outs[t]})
		a.outs[t] = nil // the sent slice belongs to the transport
	}
	a.dirty = a.dirty[:0]
}

func (a *ackerExec) run() {
	rt := a.rt
	// A timer re-armed after each rotation rather than a ticker: rotations stay a
	// full interval apart (a stalled acker rotates late, never twice in a row, as the
	// spout), and a test's fake clock sees the timer armed again only once the
	// rotation is done.
	var tick <-chan time.Time
	var rotate clock.Timer
	every := rt.cfg.MessageTimeout / rotationsPerTimeout
	if !rt.cfg.DisableTimeouts {
		rotate = rt.clock.NewTimer(every)
		defer rotate.Stop()
		tick = rotate.C()
	}
	workersDone := rt.workersDone
	var hard <-chan struct{}
	for {
		select {
		case <-workersDone:
			// This host's spouts and bolts have exited. After a hard stop nothing
			// more is waited for; otherwise the ends of other hosts' tasks are.
			if rt.hard.Err() != nil {
				a.process()
				return
			}
			workersDone, hard = nil, rt.hard.Done()
		case <-hard:
			a.process()
			return
		case <-a.ep.inbox.Signal():
			a.process()
		case <-tick:
			a.process()
			a.mu.Lock()
			a.ledger.Rotate()
			a.mu.Unlock()
			rotate.Reset(every)
		case <-a.ep.endSeen:
			// Every spout and bolt task has ended: their last acks came before.
			a.process()
			return
		}
	}
}

func (a *ackerExec) snapshot(s *AckerStats) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ls := a.ledger.Stats()
	s.Pending += ls.Pending
	s.Unmatched += ls.Unmatched
	s.Completed += ls.Completed
	s.Failed += ls.Failed
	s.Resets += ls.Resets
	s.Expired += ls.Expired
	s.Orphans += ls.Orphans
	s.Rejected += a.rejected
}
