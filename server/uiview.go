package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gale-stream/gale/eventlog"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/ui"
)

// ingestView shows the ingest path in the UI (ui.Ingest): the service's and the
// log's counters, the dead letters as the log holds them, and events by id.
type ingestView struct {
	svc    *ingest.Service
	log    ingest.Log
	pebble *eventlog.Log // nil on a JetStream log: no group commit figures
}

// IngestStats reads the counters; the dead letters are those synced (FlushEvery),
// read from the log without the flush Service.DeadLetters does, so that a page
// refreshing every 2 s costs no fsync.
func (v ingestView) IngestStats(limit int) (ui.IngestStats, error) {
	st := v.svc.Stats()
	s := ui.IngestStats{At: time.Now(), Steps: map[string]uint64{}, Held: st.Held, Durable: st.Durable, Committed: st.Committed}
	if v.pebble != nil {
		ls := v.pebble.Stats()
		s.Records, s.Commits, s.CommitTime = ls.Records, ls.Commits, ls.CommitTime
		s.CommitP50, s.CommitP99 = ls.CommitQuantile(0.5), ls.CommitQuantile(0.99)
	}
	for step, n := range st.Steps {
		s.Steps[string(step)] = n
	}
	var derr error
	err := v.log.Scan(eventlog.DeadLetter, func(id string, doc []byte) bool {
		var d ingest.DeadLetter
		if derr = json.Unmarshal(doc, &d); derr != nil {
			derr = fmt.Errorf("serve: dead letter %q: %w", id, derr)
			return false
		}
		s.DeadLetters = append(s.DeadLetters, ui.DeadLetterView{EventID: d.EventID, Seq: d.Seq, Attempts: d.Attempts,
			Reason: d.LastError, At: time.Unix(0, d.At).UnixMilli()})
		return len(s.DeadLetters) < limit
	})
	return s, errors.Join(err, derr)
}

// Event is GET /v1/events/{id}'s status; its message id in the topology is its seq
// (the log spout's), under which lineage keeps its trees.
func (v ingestView) Event(id string) (ui.EventView, error) {
	st, err := v.svc.Status(id)
	if errors.Is(err, ingest.ErrNotFound) {
		return ui.EventView{}, fmt.Errorf("serve: event %q: %w", id, ui.ErrNoEvent)
	}
	if err != nil {
		return ui.EventView{}, err
	}
	ev := ui.EventView{EventID: st.EventID, Status: st.Status.String(), Seq: st.Seq, Generation: st.Generation,
		Attempts: st.Attempts, LastError: st.LastError}
	if st.Seq != 0 {
		ev.MsgIDs = []string{strconv.FormatUint(st.Seq, 10)}
	}
	for _, tr := range st.Transitions {
		tv := ui.TransitionView{Step: string(tr.Step), At: time.Unix(0, tr.At).UnixMilli(), Attempt: tr.Attempt, Error: tr.Error}
		if tr.Status != 0 {
			tv.Status = tr.Status.String()
		}
		ev.Transitions = append(ev.Transitions, tv)
	}
	return ev, nil
}
