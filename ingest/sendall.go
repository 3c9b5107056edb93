package ingest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gale-stream/gale/event"
)

// SendOptions tune Client.SendAll; DefaultSendOptions are gale ingest's defaults.
type SendOptions struct {
	// Batch is the events of one request (NDJSON), 1 to 100,000; Workers the
	// requests in flight, 1 to 1024.
	Batch, Workers int
	// Retries is how many times a request that got no answer per event, or an event
	// answered FAILED_RETRYABLE, is sent again (same event_id) before it is given up
	// (it then ends FAILED_RETRYABLE in the report); 0 to 10,000.
	Retries int
	// Level is the ack level asked for (0: the server's default per source); Wait
	// how long one request waits for ack=processed before the server answers
	// PERSISTED (0: the server's default; at most 10 minutes, as gale serve takes).
	Level Level
	Wait  time.Duration
	// Deadline bounds the polling of the events answered before they were final
	// (PERSISTED, ACCEPTED): past it, they end in the report as they last read.
	// Durations are not negative: SendAll refuses options out of bounds, naming
	// the field.
	Deadline time.Duration
	// GiveUp stops the run with an error wrapping ErrNoProgress once no event has
	// got an answer other than FAILED_RETRYABLE for this long while the run waited
	// on the server (0: never). The time the iterator takes to produce events is
	// not counted: a slow input is no stall.
	GiveUp time.Duration
	// Progress, if set, is told what happens as it happens, one call at a time; it
	// must not block for long (the senders wait for it).
	Progress func(Progress)
}

// DefaultSendOptions: batches of 500, 4 in flight, 10 retries, ack=processed
// waiting 30 s, 2 minutes of polling, and a stop after a minute without progress.
func DefaultSendOptions() SendOptions {
	return SendOptions{Batch: 500, Workers: 4, Retries: 10, Level: LevelProcessed,
		Wait: 30 * time.Second, Deadline: 2 * time.Minute, GiveUp: time.Minute}
}

// ProgressKind says what a Progress reports.
type ProgressKind uint8

const (
	// ProgressBatch: every event of a batch has an answer, final or to be polled
	// (Batch events).
	ProgressBatch ProgressKind = iota + 1
	// ProgressRetryRequest: a request got no answer per event (Err: a connection
	// refused, a non-gale answer, ErrProtocol, a *BatchRefusedError); its Request
	// events are sent again after Wait, or at once in two halves when the batch
	// was refused as a whole FAILED_FINAL (413, 400).
	ProgressRetryRequest
	// ProgressRetryEvents: Events of a request's Request events were answered
	// FAILED_RETRYABLE (HTTPStatus, and the first one's Reason); they are sent again
	// after Wait.
	ProgressRetryEvents
	// ProgressGaveUp: a request still got no answer per event after Tries re-sends
	// (Err); its Request events end FAILED_RETRYABLE. Not reported once the run is
	// stopped.
	ProgressGaveUp
	// ProgressPoll: a round of polling the events not yet final is over; Events are
	// still not, and Err is the round's last error reading a status (nil if none).
	ProgressPoll
)

// Progress is one step of Client.SendAll, with the run's counts so far.
type Progress struct {
	Kind ProgressKind
	// Sent, Resent and Retries are the report's so far; Answered counts the events
	// with an answer (final, or waiting to be polled); Elapsed is since the start.
	Sent, Answered, Resent, Retries int
	Elapsed                         time.Duration
	// Batch: ProgressBatch's events.
	Batch int
	// Request, FirstID and LastID: the request retried or given up (its events,
	// the first's and the last's id).
	Request         int
	FirstID, LastID string
	// Events: how many are sent again (ProgressRetryEvents), given up or resent
	// (equal to Request), or still polled (ProgressPoll).
	Events int
	// Retry numbers a retried request (the report's Retries with it); Tries is the
	// re-sends made before giving up; Wait is the pause before the re-send.
	Retry, Tries int
	Wait         time.Duration
	// Err is why a request failed or polling did; HTTPStatus and Reason say why
	// events were answered FAILED_RETRYABLE.
	Err        error
	HTTPStatus int
	Reason     string
}

// Report is what happened to every event Client.SendAll sent.
type Report struct {
	Sent int `json:"events_sent"`
	// Unsent counts the events read from the iterator but never sent: the run was
	// stopped (ctx, no progress) before their turn. They are in no other count.
	Unsent int `json:"events_not_sent,omitempty"`
	// Final counts the events by the status they ended with (Status.String()).
	Final      map[string]int `json:"final_status"`
	Duplicates int            `json:"duplicate_answers"`
	// Resent counts events sent again (same event_id), Retries the requests that
	// carried them, of which Failed were retries of a request that got no answer
	// per event (connection refused, a non-gale answer).
	Resent  int `json:"resent_events"`
	Retries int `json:"retried_requests"`
	Failed  int `json:"failed_requests"`
	// Problems are the events that ended other than PROCESSED (FAILED_FINAL with the
	// reason, or not final), by event id.
	Problems []Answer      `json:"problems,omitempty"`
	Elapsed  time.Duration `json:"-"`
}

// Broken counts the events that broke the promise: not finished (still PERSISTED or
// ACCEPTED, or retryable after every re-send), or FAILED_FINAL with no reason.
func (r *Report) Broken() int {
	n := r.Final[Persisted.String()] + r.Final[Accepted.String()] + r.Final[FailedRetryable.String()]
	for _, p := range r.Problems {
		if p.Status == FailedFinal && p.Error == "" {
			n++
		}
	}
	return n
}

// ErrNoProgress is what a SendAll stopped after SendOptions.GiveUp wraps.
var ErrNoProgress = errors.New("no progress")

// sendBackoff is the pause before re-send number try+1: 50 ms doubling, at most 2 s.
func sendBackoff(try int) time.Duration {
	return min(50*time.Millisecond<<min(try, 6), 2*time.Second)
}

// SendAll sends every event of events in batches of o.Batch, o.Workers requests at
// a time, and follows each to its end:
//
//   - a request that got no answer per event (transport failure, answers for other
//     ids: ErrProtocol, a batch refused as a whole with 429, 503 or FAILED_RETRYABLE)
//     is sent again with the same ids after a backoff (50 ms doubling up to 2 s;
//     at least the Retry-After, or a second, on 429 and 503), at most o.Retries
//     times, then its events end FAILED_RETRYABLE;
//   - a batch refused as a whole FAILED_FINAL (413 too large, 400 for a line) is
//     sent again in halves, so that the events that can go in do; an event refused
//     so alone ends FAILED_FINAL with the reason. A 401 or 403 for the batch (the
//     token) stops the run with an error;
//   - events answered FAILED_RETRYABLE are sent again the same way, after at least
//     a second when the server answered 429 or 503;
//   - events answered before they were final (PERSISTED when a request's wait ran
//     out, ACCEPTED) are polled (Client.Status) until PROCESSED or FAILED_FINAL, or
//     o.Deadline.
//
// When no event has got an answer other than FAILED_RETRYABLE for o.GiveUp while
// requests or polls were under way (waiting for events does not count), the run
// stops with an error wrapping ErrNoProgress that names the last error. An error
// events yields stops the reading: every event yielded before it is still sent
// and followed to its end as above, so that each is in the report, and the error
// is returned. The report is returned whatever the error; events read but not
// sent because the run was stopped are counted in Report.Unsent.
//
// A stopped run (parent cancelled, no progress) returns at once even if events is
// blocked producing its next event: the goroutine reading it is then left behind,
// and ends when events next yields (yield returns false) or returns.
func (c *Client) SendAll(parent context.Context, events iter.Seq2[event.Event, error], o SendOptions) (rep *Report, err error) {
	start := time.Now()
	rep = &Report{Final: map[string]int{}}
	defer func() { rep.Elapsed = time.Since(start) }()
	if err := checkSendOptions(o); err != nil {
		return rep, err
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	r := &sendRun{c: c, o: o, ctx: ctx, cancel: cancel, start: start, rep: rep}
	if o.GiveUp > 0 {
		go r.watchdog()
	}
	// The reader runs in its own goroutine, so that a stopped run need not wait for
	// an iterator blocked in its next event: the workers and SendAll leave on ctx.
	batches := make(chan []event.Event, o.Workers)
	readDone := make(chan error, 1)
	go func() {
		defer close(batches) // after readDone is told: the workers' end is its sign
		readDone <- r.readEvents(events, batches)
	}()
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case b, ok := <-batches:
					if !ok {
						return
					}
					if ctx.Err() == nil {
						r.busy()
						r.sendBatch(b)
						r.idle()
					}
				}
			}
		})
	}
	wg.Wait()
	var readErr error
	select {
	case readErr = <-readDone:
	default: // stopped while reading: the reader leaves when events next yields
	}
	r.poll()
	sort.Slice(rep.Problems, func(i, j int) bool { return rep.Problems[i].EventID < rep.Problems[j].EventID })
	rep.Unsent = int(r.read.Load()) - rep.Sent
	switch {
	case parent.Err() != nil:
		return rep, parent.Err()
	case readErr != nil && context.Cause(ctx) != nil:
		return rep, errors.Join(readErr, context.Cause(ctx))
	case readErr != nil:
		return rep, readErr
	}
	return rep, context.Cause(ctx)
}

// checkSendOptions refuses options SendAll cannot run with, naming the field.
// The bounds of SendOptions: a batch is held in memory with its answers, and every
// request in flight is a goroutine and a connection. A gale serve takes at most
// HTTPOptions.MaxBatchLines events a request (DefaultMaxBatchLines) and waits at
// most 10 minutes for ack=processed.
const (
	maxSendBatch   = 100_000
	maxSendWorkers = 1024
	maxSendRetries = 10_000
	maxSendWait    = 10 * time.Minute
)

// OptionError is SendAll's refusal of a field of SendOptions, with its bounds.
type OptionError struct {
	Field string // "Batch", "Workers"...
	Value any
	Want  string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("ingest client: SendOptions.%s = %v: %s", e.Field, e.Value, e.Want)
}

// Check refuses options SendAll cannot run with (an *OptionError naming the
// field and its bounds), so that a program checks them before it opens its input.
func (o SendOptions) Check() error { return checkSendOptions(o) }

// checkSendOptions refuses options SendAll cannot run with, naming the field and
// its bounds.
func checkSendOptions(o SendOptions) error {
	bad := func(field string, v any, want string) error {
		return &OptionError{Field: field, Value: v, Want: want}
	}
	switch {
	case o.Batch < 1 || o.Batch > maxSendBatch:
		return bad("Batch", o.Batch, fmt.Sprintf("want 1 to %d events a request", maxSendBatch))
	case o.Workers < 1 || o.Workers > maxSendWorkers:
		return bad("Workers", o.Workers, fmt.Sprintf("want 1 to %d requests in flight", maxSendWorkers))
	case o.Retries < 0 || o.Retries > maxSendRetries:
		return bad("Retries", o.Retries, fmt.Sprintf("want 0 to %d re-sends", maxSendRetries))
	case o.Level > LevelProcessed:
		return bad("Level", o.Level, "want 0 (the server's default), LevelAccepted, LevelPersisted or LevelProcessed")
	case o.Wait < 0 || o.Wait > maxSendWait:
		return bad("Wait", o.Wait, fmt.Sprintf("want 0 (the server's default) to %v", maxSendWait))
	case o.Deadline < 0:
		return bad("Deadline", o.Deadline, "want 0 (no polling) or more")
	case o.GiveUp < 0:
		return bad("GiveUp", o.GiveUp, "want 0 (never) or more")
	}
	return nil
}

// sendRun is what the steps of one SendAll share.
type sendRun struct {
	c      *Client
	o      SendOptions
	ctx    context.Context
	cancel context.CancelCauseFunc
	start  time.Time

	mu      sync.Mutex // guards rep, pending, lastErr, and calls o.Progress
	rep     *Report
	pending []string // answered before final: to be polled
	lastErr string
	read    atomic.Int64 // events taken from the iterator
	// waiting counts the batches being sent and the polling under way: the run
	// waits on the server only while it is not 0, and only then can it stall.
	waiting int
	// lastProgress is when an event last got an answer other than FAILED_RETRYABLE
	// (Unix nanoseconds), or when the run last began to wait on the server.
	lastProgress atomic.Int64
}

func (r *sendRun) progressed() { r.lastProgress.Store(time.Now().UnixNano()) }

// tell gives p, with the run's counts, to o.Progress; r.mu is held.
func (r *sendRun) tell(p Progress) {
	if r.o.Progress == nil {
		return
	}
	p.Sent, p.Resent, p.Retries = r.rep.Sent, r.rep.Resent, r.rep.Retries
	p.Answered = len(r.pending)
	for _, n := range r.rep.Final {
		p.Answered += n
	}
	p.Elapsed = time.Since(r.start)
	r.o.Progress(p)
}

// told is tell with r.mu taken.
func (r *sendRun) told(p Progress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tell(p)
}

// final counts a's status in the report.
func (r *sendRun) final(a Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rep.Final[a.Status.String()]++
	if a.Status != Processed {
		r.rep.Problems = append(r.rep.Problems, a)
	}
}

// failedAll ends every event of evs FAILED_RETRYABLE with err.
func (r *sendRun) failedAll(evs []event.Event, err error) {
	for _, e := range evs {
		r.final(Answer{EventID: e.ID, Status: FailedRetryable, Error: err.Error()})
	}
}

func (r *sendRun) setLastErr(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastErr = s
}

// sleep waits d, or until the run is stopped.
func (r *sendRun) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.ctx.Done():
	}
}

// busy marks the start of a wait on the server (a batch, the polling); its end is
// idle. The no-progress clock starts again when the run goes from waiting on
// nothing (its iterator producing the next events) to waiting on the server.
func (r *sendRun) busy() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting == 0 {
		r.progressed()
	}
	r.waiting++
}

func (r *sendRun) idle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting--
}

// watchdog stops the run once no event has got an answer other than
// FAILED_RETRYABLE for o.GiveUp while the run waited on the server; time spent
// waiting for events only (a slow iterator) does not count.
func (r *sendRun) watchdog() {
	t := time.NewTicker(max(min(r.o.GiveUp/10, time.Second), time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		since := time.Since(time.Unix(0, r.lastProgress.Load()))
		stalled, last := r.waiting > 0 && since >= r.o.GiveUp, r.lastErr
		r.mu.Unlock()
		if !stalled {
			continue
		}
		if last == "" {
			last = "none"
		}
		round := time.Second
		if since < time.Second {
			round = time.Millisecond
		}
		r.cancel(fmt.Errorf("%w for %v: no event got an answer other than FAILED_RETRYABLE; the last error: %s",
			ErrNoProgress, since.Round(round), last))
		return
	}
}

// readEvents cuts events into batches of o.Batch on batches. An error events
// yields ends the reading: the events before it still go, as a last, partial
// batch, and the error is returned (nil once the run is stopped). r.read counts
// the events taken.
func (r *sendRun) readEvents(events iter.Seq2[event.Event, error], batches chan<- []event.Event) error {
	var cur []event.Event
	flush := func() bool {
		if len(cur) == 0 {
			return true
		}
		select {
		case batches <- cur:
			cur = nil
			return true
		case <-r.ctx.Done():
			return false
		}
	}
	for e, err := range events {
		if r.ctx.Err() != nil {
			return nil // SendAll may have returned: events yielded late are not read
		}
		if err != nil {
			if !flush() {
				return nil
			}
			return err
		}
		r.read.Add(1)
		cur = append(cur, e)
		if len(cur) == r.o.Batch && !flush() {
			return nil
		}
	}
	flush()
	return nil
}

// request is a Progress naming the request of evs.
func request(evs []event.Event) Progress {
	return Progress{Request: len(evs), FirstID: evs[0].ID, LastID: evs[len(evs)-1].ID}
}

// sendBatch sends b until each event has an answer (final, or to be polled) or is
// given up. A batch refused as a whole for what it holds is sent again in halves,
// each its own request, depth first.
func (r *sendRun) sendBatch(b []event.Event) {
	r.mu.Lock()
	r.rep.Sent += len(b)
	r.mu.Unlock()
	parts := [][]event.Event{b}
	for len(parts) > 0 {
		send := parts[len(parts)-1]
		parts = append(parts[:len(parts)-1], r.sendRequest(send)...)
	}
	r.told(Progress{Kind: ProgressBatch, Batch: len(b)})
}

// sendRequest sends send, again with backoff as long as it gets no answer per
// event or some answered FAILED_RETRYABLE, until each event has an answer or is
// given up; or it returns send's halves, to be sent as requests of their own.
func (r *sendRun) sendRequest(send []event.Event) (halves [][]event.Event) {
	for try := 0; len(send) > 0; try++ {
		answers, code, err := r.c.Send(r.ctx, send, r.o.Level, r.o.Wait)
		var refusal *BatchRefusedError
		switch {
		case errors.As(err, &refusal):
			again, halves := r.refused(send, try, refusal)
			if !again {
				return halves
			}
		case answers == nil:
			if !r.retryRequest(send, try, err, 0) {
				return nil
			}
		default:
			send = r.answered(send, answers, code, try)
		}
	}
	return nil
}

// refused handles the answer to the try-th re-send of send given for the batch as
// a whole: never an event's own answer unless send is that one event. It says
// whether to send send again (after a pause), or returns its halves to send.
//
//   - 401, 403: the token is refused, whatever the events: the run stops, with
//     send's events unresolved (FAILED_RETRYABLE);
//   - 429, 503, or any answer other than FAILED_FINAL: send is sent again whole,
//     after the backoff or the answer's Retry-After (a second at least on 429 and
//     503), as a request that got no answer per event;
//   - FAILED_FINAL (413 too large, 400 for one bad line...): send is sent in two
//     halves, so the events that can go in do, and one event alone answered so
//     ends with that answer.
func (r *sendRun) refused(send []event.Event, try int, refusal *BatchRefusedError) (again bool, halves [][]event.Event) {
	switch code := refusal.Code; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		err := fmt.Errorf("ingest client: the server refuses the requests: %w", refusal)
		r.setLastErr(err.Error())
		r.cancel(err)
		r.failedAll(send, err)
		return false, nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return r.retryRequest(send, try, refusal, max(refusal.RetryAfter, time.Second)), nil
	case refusal.Answer.Status != FailedFinal:
		return r.retryRequest(send, try, refusal, refusal.RetryAfter), nil
	case len(send) == 1:
		r.progressed()
		r.final(Answer{EventID: send[0].ID, Status: FailedFinal, Error: refusal.Answer.Error})
		return false, nil
	}
	half := len(send) / 2
	r.mu.Lock()
	r.rep.Retries += 2
	r.rep.Failed += 2
	r.rep.Resent += len(send)
	r.lastErr = refusal.Error()
	p := request(send)
	p.Kind, p.Events, p.Retry = ProgressRetryRequest, len(send), r.rep.Retries
	p.Err = fmt.Errorf("%w; sending it again as %d and %d events", refusal, half, len(send)-half)
	r.tell(p)
	r.mu.Unlock()
	return false, [][]event.Event{send[half:], send[:half]} // the first half first
}

// retryRequest handles a request of send, try-th re-send, that got no answer per
// event (err): it waits (the backoff, at least minWait) before a re-send and says
// true, or gives the events up.
func (r *sendRun) retryRequest(send []event.Event, try int, err error, minWait time.Duration) bool {
	if r.ctx.Err() != nil {
		err = context.Cause(r.ctx)
	}
	r.setLastErr(err.Error())
	if try >= r.o.Retries || r.ctx.Err() != nil {
		if r.ctx.Err() == nil {
			p := request(send)
			p.Kind, p.Events, p.Tries, p.Err = ProgressGaveUp, len(send), try, err
			r.told(p)
		}
		r.failedAll(send, err)
		return false
	}
	wait := max(sendBackoff(try), minWait)
	r.mu.Lock()
	r.rep.Retries++
	r.rep.Failed++
	r.rep.Resent += len(send)
	p := request(send)
	p.Kind, p.Events, p.Retry, p.Err, p.Wait = ProgressRetryRequest, len(send), r.rep.Retries, err, wait
	r.tell(p)
	r.mu.Unlock()
	r.sleep(wait)
	return true
}

// answered takes the answers (HTTP code) to the try-th re-send of send: the final
// ones are counted, the ones to poll kept; it returns the events answered
// FAILED_RETRYABLE, to send again after a pause, unless given up.
func (r *sendRun) answered(send []event.Event, answers []Answer, code, try int) (again []event.Event) {
	why := ""
	for i, a := range answers {
		if a.Duplicate {
			r.mu.Lock()
			r.rep.Duplicates++
			r.mu.Unlock()
		}
		if a.Status != FailedRetryable {
			r.progressed()
		}
		switch a.Status {
		case Processed, FailedFinal:
			r.final(a)
		case FailedRetryable:
			if try >= r.o.Retries || r.ctx.Err() != nil {
				r.final(a)
			} else {
				again = append(again, send[i])
				if why == "" {
					why = a.Error
				}
			}
		default:
			r.mu.Lock()
			r.pending = append(r.pending, a.EventID)
			r.mu.Unlock()
		}
	}
	if len(again) > 0 {
		wait := sendBackoff(try)
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			wait = max(wait, time.Second)
		}
		r.mu.Lock()
		r.rep.Retries++
		r.rep.Resent += len(again)
		r.lastErr = fmt.Sprintf("HTTP %d: %s", code, why)
		p := request(send)
		p.Kind, p.Events, p.Retry, p.HTTPStatus, p.Reason, p.Wait = ProgressRetryEvents, len(again), r.rep.Retries, code, why, wait
		r.tell(p)
		r.mu.Unlock()
		r.sleep(wait)
	}
	return again
}

// poll reads the status of the events answered before they were final until each
// is, or o.Deadline, or the run is stopped; each ends in the report as it last
// read.
func (r *sendRun) poll() {
	r.busy()
	defer r.idle()
	deadline := time.Now().Add(r.o.Deadline)
	for len(r.pending) > 0 && r.ctx.Err() == nil {
		var still []string
		var pollErr error
		for _, id := range r.pending {
			st, found, err := r.c.Status(r.ctx, id)
			if err != nil {
				pollErr = err
			}
			switch {
			case err != nil || !found || (st.Status != Processed && st.Status != FailedFinal):
				if time.Now().After(deadline) || r.ctx.Err() != nil {
					a := Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError}
					if err != nil {
						a.Error = err.Error()
					}
					r.final(a)
				} else {
					still = append(still, id)
				}
			default:
				r.progressed()
				r.final(Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError})
			}
		}
		r.mu.Lock()
		r.pending = still
		if pollErr != nil {
			r.lastErr = pollErr.Error()
		}
		r.tell(Progress{Kind: ProgressPoll, Events: len(still), Err: pollErr})
		r.mu.Unlock()
		if len(r.pending) > 0 {
			r.sleep(100 * time.Millisecond)
		}
	}
	for _, id := range r.pending { // the run was stopped while polling
		r.final(Answer{EventID: id, Status: Persisted, Error: "not polled to the end: " + context.Cause(r.ctx).Error()})
	}
}
