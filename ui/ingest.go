package ui

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Ingest is the ingest path in front of the topology, for the page: gale serve's
// service and log implement it; a topology fed otherwise (gale wordcount) has none.
type Ingest interface {
	// IngestStats returns the counters now and up to deadLetters dead letters.
	IngestStats(deadLetters int) (IngestStats, error)
	// Event returns an event's status, or an error wrapping ErrNoEvent.
	Event(id string) (EventView, error)
}

// ErrNoEvent is wrapped by Ingest.Event's error for an id it does not know.
var ErrNoEvent = errors.New("no such event")

// IngestStats are the ingest path's counters at one moment. Counts are since the
// process started; the UI turns two samples into rates.
type IngestStats struct {
	At time.Time
	// Steps counts the events' transitions by step (received, persisted, started,
	// failed, interrupted, completed, dead_letter, resubmitted).
	Steps map[string]uint64
	// Held: events in memory, not finished yet.
	Held int
	// Durable is the newest durable seq of the log; Committed the next seq to
	// process (every seq below it is finished).
	Durable, Committed uint64
	// Records and Commits are what the log synced; CommitTime their total time, and
	// CommitP50 and CommitP99 the quantiles of one commit's time (append to fsync
	// returned), since the start.
	Records, Commits     uint64
	CommitTime           time.Duration
	CommitP50, CommitP99 time.Duration
	// DeadLetters are some of the events that ended FAILED_FINAL, with their reasons.
	DeadLetters []DeadLetterView
}

// DeadLetterView is one dead letter.
type DeadLetterView struct {
	EventID  string `json:"event_id"`
	Seq      uint64 `json:"seq"`
	Attempts int    `json:"attempts"`
	Reason   string `json:"reason"`
	At       int64  `json:"at"` // Unix milliseconds
}

// EventView is an event's status, as GET /v1/events/{id} answers it, with the
// message ids its attempts had in the topology (the log spout's: the record's seq).
type EventView struct {
	EventID     string           `json:"event_id"`
	Status      string           `json:"status"`
	Seq         uint64           `json:"seq"`
	Generation  uint32           `json:"generation"`
	Attempts    int              `json:"attempts"`
	LastError   string           `json:"last_error,omitempty"`
	Transitions []TransitionView `json:"transitions"`
	MsgIDs      []string         `json:"msg_ids"`
}

// TransitionView is one step of an event's history.
type TransitionView struct {
	Step    string `json:"step"`
	Status  string `json:"status,omitempty"`
	At      int64  `json:"at"` // Unix milliseconds
	Attempt int    `json:"attempt,omitempty"`
	Error   string `json:"error,omitempty"`
}

// statusSteps maps the statuses to the steps that enter them, in the order of
// progress (FAILED_RETRYABLE: an attempt failed and a retry is due, or an append
// failed).
var statusSteps = []struct {
	status string
	steps  []string
}{
	{"ACCEPTED", []string{"received", "resubmitted"}},
	{"PERSISTED", []string{"persisted"}},
	{"PROCESSED", []string{"completed"}},
	{"FAILED_RETRYABLE", []string{"failed"}},
	{"FAILED_FINAL", []string{"dead_letter"}},
}

// IngestPanel is /api/ingest: the counts now, and the rates over the last interval
// between two samples at least a second apart (none until there are two).
type IngestPanel struct {
	Statuses        []StatusCount      `json:"statuses"`
	Steps           map[string]uint64  `json:"steps"`
	Held            int                `json:"held"`
	IntervalSeconds float64            `json:"interval_seconds"`
	Rates           map[string]float64 `json:"rates"` // per step, per second
	Log             LogView            `json:"log"`
	DeadLetters     []DeadLetterView   `json:"dead_letters"`
}

// StatusCount is how many events entered a status, and how fast lately.
type StatusCount struct {
	Status string   `json:"status"`
	Count  uint64   `json:"count"`
	PerS   *float64 `json:"per_s"`
}

// LogView is the log's part: sequence numbers, what it synced, and the group
// commit (fsync) latency: the mean over the last interval, p50 and p99 since start.
type LogView struct {
	Durable         uint64   `json:"durable"`
	Committed       uint64   `json:"committed"`
	Lag             uint64   `json:"lag"` // durable records not finished: durable - committed + 1
	Records         uint64   `json:"records"`
	Commits         uint64   `json:"commits"`
	RecordsPerS     *float64 `json:"records_per_s"`
	CommitsPerS     *float64 `json:"commits_per_s"`
	CommitMeanMs    *float64 `json:"commit_mean_ms"` // over the interval; nil without commits in it
	CommitP50Ms     float64  `json:"commit_p50_ms"`
	CommitP99Ms     float64  `json:"commit_p99_ms"`
	CommitAllMeanMs float64  `json:"commit_all_mean_ms"`
}

// ingestRates keeps the two newest samples at least a second apart: the rates come
// from them, whoever asks and however often.
type ingestRates struct {
	mu         sync.Mutex
	prev, last *IngestStats
}

func (r *ingestRates) add(s IngestStats) (prev, last *IngestStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.last == nil:
		r.last = &s
	case s.At.Sub(r.last.At) >= time.Second:
		r.prev, r.last = r.last, &s
	}
	return r.prev, r.last
}

func (u *UI) ingest(w http.ResponseWriter, r *http.Request) {
	if u.o.Ingest == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no ingest path in this process (only gale serve has one)"})
		return
	}
	s, err := u.o.Ingest.IngestStats(50)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": fmt.Sprintf("reading the ingest stats: %v", err)})
		return
	}
	prev, last := u.rates.add(s)
	p := IngestPanel{Steps: s.Steps, Held: s.Held, Rates: map[string]float64{}, DeadLetters: s.DeadLetters}
	if p.Steps == nil {
		p.Steps = map[string]uint64{}
	}
	if p.DeadLetters == nil {
		p.DeadLetters = []DeadLetterView{}
	}
	var dt float64
	if prev != nil {
		dt = last.At.Sub(prev.At).Seconds()
		p.IntervalSeconds = dt
		for step, n := range last.Steps {
			p.Rates[step] = float64(n-prev.Steps[step]) / dt
		}
	}
	rate := func(steps []string) *float64 {
		if prev == nil {
			return nil
		}
		v := 0.0
		for _, st := range steps {
			v += p.Rates[st]
		}
		return &v
	}
	for _, ss := range statusSteps {
		c := StatusCount{Status: ss.status, PerS: rate(ss.steps)}
		for _, st := range ss.steps {
			c.Count += s.Steps[st]
		}
		p.Statuses = append(p.Statuses, c)
	}
	p.Log = LogView{Durable: s.Durable, Committed: s.Committed, Records: s.Records, Commits: s.Commits,
		CommitP50Ms: ms(s.CommitP50), CommitP99Ms: ms(s.CommitP99)}
	if s.Durable+1 > s.Committed {
		p.Log.Lag = s.Durable + 1 - s.Committed
	}
	if s.Commits > 0 {
		p.Log.CommitAllMeanMs = ms(s.CommitTime) / float64(s.Commits)
	}
	if prev != nil {
		rec, com := float64(last.Records-prev.Records)/dt, float64(last.Commits-prev.Commits)/dt
		p.Log.RecordsPerS, p.Log.CommitsPerS = &rec, &com
		if n := last.Commits - prev.Commits; n > 0 {
			m := ms(last.CommitTime-prev.CommitTime) / float64(n)
			p.Log.CommitMeanMs = &m
		}
	}
	writeJSON(w, http.StatusOK, p)
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// EventPage is /api/events/{id}: the event's status and the trees recorded for its
// message ids (sampled, failed or timed out, newest last).
type EventPage struct {
	Event EventView  `json:"event"`
	Trees []TreeView `json:"trees"`
	Note  string     `json:"note,omitempty"`
}

func (u *UI) event(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if u.o.Ingest == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no ingest path in this process: look up a message id or root id instead"})
		return
	}
	ev, err := u.o.Ingest.Event(id)
	if errors.Is(err, ErrNoEvent) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no event %q", id)})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": fmt.Sprintf("event %q: %v", id, err)})
		return
	}
	if ev.Transitions == nil {
		ev.Transitions = []TransitionView{}
	}
	if ev.MsgIDs == nil {
		ev.MsgIDs = []string{}
	}
	p := EventPage{Event: ev, Trees: []TreeView{}}
	// The log spout runs in this process (gale serve's), whose recorder keeps the
	// trees whole, wherever their bolts ran.
	if g, why := u.lineage(); g == nil {
		p.Note = why + ": no trees are recorded"
	} else {
		lin := g.lin
		for _, m := range ev.MsgIDs {
			for _, root := range lin.Attempts(m) {
				if t, ok := lin.Lookup(hexID(root)); ok {
					p.Trees = append(p.Trees, summary(t))
				}
			}
		}
		if len(p.Trees) == 0 {
			p.Note = fmt.Sprintf("no tree of this event is kept: only sampled (%g%%), failed and timed-out trees are", 100*lin.Config().Sample)
		}
	}
	writeJSON(w, http.StatusOK, p)
}
