package engine

import (
	"sync"
	"time"

	"github.com/gale-stream/gale/acker"
	"github.com/gale-stream/gale/transport"
)

// ackerExec is one acker task: the pure ledger, plus the goroutine, clock and transport
// around it.
type ackerExec struct {
	rt       *Runtime
	task     int
	inbox    transport.Inbox
	mu       sync.Mutex // guards ledger and rejected for Stats
	ledger   *acker.Ledger
	rejected uint64
	msgs     []acker.Msg
	outs     [][]acker.Outcome // by spout task id
	dirty    []int
}

// ackerBuckets: one bucket more than the spout's pending map, so the acker drops a
// tree only after its spout has timed it out.
const ackerBuckets = rotationsPerTimeout + 2

func (a *ackerExec) process() {
	a.msgs = a.inbox.TakeAcks(a.msgs)
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
			if t <= 0 || t >= len(a.outs) {
				a.rejected++
				a.rt.log.Warn("acker outcome for an unknown spout task", "task", a.task, "spout_task", t, "root", o.Root)
				continue
			}
			if len(a.outs[t]) == 0 {
				a.dirty = append(a.dirty, t)
			}
			a.outs[t] = append(a.outs[t], o)
		}
	}
	a.mu.Unlock()
	for _, t := range a.dirty {
		_ = a.rt.transport.SendOutcomes(t, a.outs[t])
		a.outs[t] = a.outs[t][:0]
	}
	a.dirty = a.dirty[:0]
}

func (a *ackerExec) run() {
	rt := a.rt
	var tick <-chan time.Time
	if !rt.cfg.DisableTimeouts {
		t := time.NewTicker(rt.cfg.MessageTimeout / rotationsPerTimeout)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-a.inbox.Signal():
			a.process()
		case <-tick:
			a.process()
			a.mu.Lock()
			a.ledger.Rotate()
			a.mu.Unlock()
		case <-rt.ackersStop:
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
