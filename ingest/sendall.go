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
	// Batch is the events of one request (NDJSON), Workers the requests in flight;
	// both at least 1.
	Batch, Workers int
	// Retries is how many times a request that got no answer per event, or an event
	// answered FAILED_RETRYABLE, is sent again (same event_id) before it is given up
	// (it then ends FAILED_RETRYABLE in the report).
	Retries int
	// Level is the ack level asked for (0: the server's default per source); Wait
	// how long one request waits for ack=processed before the server answers
	// PERSISTED (0: the server's default).
	Level Level
	Wait  time.Duration
	// Deadline bounds the polling of the events answered before they were final
	// (PERSISTED, ACCEPTED): past it, they end in the report as they last read.
	Deadline time.Duration
	// GiveUp stops the run with an error wrapping ErrNoProgress once no event has
	// got an answer other than FAILED_RETRYABLE for this long (0: never).
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
	// refused, a non-gale answer); its Request events are sent again after Wait.
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
//   - a request that got no answer per event (transport failure, a refused batch)
//     is sent again with the same ids after a backoff (50 ms doubling up to 2 s),
//     at most o.Retries times, then its events end FAILED_RETRYABLE;
//   - events answered FAILED_RETRYABLE are sent again the same way, after at least
//     a second when the server answered 429 or 503;
//   - events answered before they were final (PERSISTED when a request's wait ran
//     out, ACCEPTED) are polled (Client.Status) until PROCESSED or FAILED_FINAL, or
//     o.Deadline.
//
// When no event has got an answer other than FAILED_RETRYABLE for o.GiveUp, the run
// stops with an error wrapping ErrNoProgress that names the last error. An error
// events yields stops the reading and the run (nothing is polled) and is returned.
// The report is returned whatever the error, and counts what was sent until then.
func (c *Client) SendAll(parent context.Context, events iter.Seq2[event.Event, error], o SendOptions) (rep *Report, err error) {
	start := time.Now()
	rep = &Report{Final: map[string]int{}}
	defer func() { rep.Elapsed = time.Since(start) }()
	switch {
	case o.Batch < 1:
		return rep, fmt.Errorf("ingest client: a batch of %d events: must be at least 1", o.Batch)
	case o.Workers < 1:
		return rep, fmt.Errorf("ingest client: %d requests in flight: must be at least 1", o.Workers)
	case o.Retries < 0:
		return rep, fmt.Errorf("ingest client: %d retries: must be at least 0", o.Retries)
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	var mu sync.Mutex // guards rep, pending, lastErr, and calls o.Progress
	var pending []string
	var lastErr string
	var lastProgress atomic.Int64
	lastProgress.Store(time.Now().UnixNano())
	progressed := func() { lastProgress.Store(time.Now().UnixNano()) }
	tell := func(p Progress) { // with mu held
		if o.Progress == nil {
			return
		}
		p.Sent, p.Resent, p.Retries = rep.Sent, rep.Resent, rep.Retries
		p.Answered = len(pending)
		for _, n := range rep.Final {
			p.Answered += n
		}
		p.Elapsed = time.Since(start)
		o.Progress(p)
	}
	final := func(a Answer) {
		mu.Lock()
		defer mu.Unlock()
		rep.Final[a.Status.String()]++
		if a.Status != Processed {
			rep.Problems = append(rep.Problems, a)
		}
	}
	// The watchdog: no progress for o.GiveUp stops everything.
	if o.GiveUp > 0 {
		go func() {
			t := time.NewTicker(max(min(o.GiveUp/10, time.Second), time.Millisecond))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if since := time.Since(time.Unix(0, lastProgress.Load())); since >= o.GiveUp {
					mu.Lock()
					last := lastErr
					mu.Unlock()
					if last == "" {
						last = "none"
					}
					cancel(fmt.Errorf("%w for %v: no event got an answer other than FAILED_RETRYABLE; the last error: %s",
						ErrNoProgress, since.Round(time.Second), last))
					return
				}
			}
		}()
	}
	sleep := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	batches := make(chan []event.Event, o.Workers)
	var readErr error
	go func() {
		defer close(batches)
		var cur []event.Event
		for e, err := range events {
			if err != nil {
				if ctx.Err() == nil {
					readErr = err
				}
				return
			}
			cur = append(cur, e)
			if len(cur) == o.Batch {
				select {
				case batches <- cur:
				case <-ctx.Done():
					return
				}
				cur = nil
			}
		}
		if len(cur) > 0 {
			select {
			case batches <- cur:
			case <-ctx.Done():
			}
		}
	}()
	request := func(evs []event.Event) Progress {
		return Progress{Request: len(evs), FirstID: evs[0].ID, LastID: evs[len(evs)-1].ID}
	}
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() {
			for b := range batches {
				if ctx.Err() != nil {
					continue // drain: the reader is told by ctx
				}
				mu.Lock()
				rep.Sent += len(b)
				mu.Unlock()
				send := b
				for try := 0; len(send) > 0; try++ {
					answers, code, err := c.Send(ctx, send, o.Level, o.Wait)
					if answers == nil {
						if ctx.Err() != nil {
							err = context.Cause(ctx)
						}
						mu.Lock()
						lastErr = err.Error()
						mu.Unlock()
						if try >= o.Retries || ctx.Err() != nil {
							if ctx.Err() == nil {
								p := request(send)
								p.Kind, p.Events, p.Tries, p.Err = ProgressGaveUp, len(send), try, err
								mu.Lock()
								tell(p)
								mu.Unlock()
							}
							for _, e := range send {
								final(Answer{EventID: e.ID, Status: FailedRetryable, Error: err.Error()})
							}
							break
						}
						wait := sendBackoff(try)
						mu.Lock()
						rep.Retries++
						rep.Failed++
						rep.Resent += len(send)
						p := request(send)
						p.Kind, p.Events, p.Retry, p.Err, p.Wait = ProgressRetryRequest, len(send), rep.Retries, err, wait
						tell(p)
						mu.Unlock()
						sleep(wait)
						continue
					}
					var again []event.Event
					why := ""
					for i, a := range answers {
						if a.Duplicate {
							mu.Lock()
							rep.Duplicates++
							mu.Unlock()
						}
						if a.Status != FailedRetryable {
							progressed()
						}
						switch a.Status {
						case Processed, FailedFinal:
							final(a)
						case FailedRetryable:
							if try >= o.Retries || ctx.Err() != nil {
								final(a)
							} else {
								again = append(again, send[i])
								if why == "" {
									why = a.Error
								}
							}
						default:
							mu.Lock()
							pending = append(pending, a.EventID)
							mu.Unlock()
						}
					}
					if len(again) > 0 {
						wait := sendBackoff(try)
						if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
							wait = max(wait, time.Second)
						}
						mu.Lock()
						rep.Retries++
						rep.Resent += len(again)
						lastErr = fmt.Sprintf("HTTP %d: %s", code, why)
						p := request(send)
						p.Kind, p.Events, p.Retry, p.HTTPStatus, p.Reason, p.Wait = ProgressRetryEvents, len(again), rep.Retries, code, why, wait
						tell(p)
						mu.Unlock()
						sleep(wait)
					}
					send = again
				}
				mu.Lock()
				tell(Progress{Kind: ProgressBatch, Batch: len(b)})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if readErr != nil {
		return rep, readErr
	}
	// Poll the events answered before they finished.
	deadline := time.Now().Add(o.Deadline)
	for len(pending) > 0 && ctx.Err() == nil {
		var still []string
		var pollErr error
		for _, id := range pending {
			st, found, err := c.Status(ctx, id)
			if err != nil {
				pollErr = err
			}
			switch {
			case err != nil || !found || (st.Status != Processed && st.Status != FailedFinal):
				if time.Now().After(deadline) || ctx.Err() != nil {
					a := Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError}
					if err != nil {
						a.Error = err.Error()
					}
					final(a)
				} else {
					still = append(still, id)
				}
			default:
				progressed()
				final(Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError})
			}
		}
		mu.Lock()
		pending = still
		if pollErr != nil {
			lastErr = pollErr.Error()
		}
		tell(Progress{Kind: ProgressPoll, Events: len(still), Err: pollErr})
		mu.Unlock()
		if len(pending) > 0 {
			sleep(100 * time.Millisecond)
		}
	}
	for _, id := range pending { // the run was stopped while polling
		final(Answer{EventID: id, Status: Persisted, Error: "not polled to the end: " + context.Cause(ctx).Error()})
	}
	sort.Slice(rep.Problems, func(i, j int) bool { return rep.Problems[i].EventID < rep.Problems[j].EventID })
	if parent.Err() != nil {
		return rep, parent.Err()
	}
	return rep, context.Cause(ctx)
}
