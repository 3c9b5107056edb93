package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/pipelines/orders"
)

type ingestOptions struct {
	batch, workers, retries int
	level                   ingest.Level
	wait, deadline, giveUp  time.Duration
}

func defaultIngestOptions() ingestOptions {
	return ingestOptions{batch: 500, workers: 4, retries: 10, level: ingest.LevelProcessed,
		wait: 30 * time.Second, deadline: 2 * time.Minute, giveUp: time.Minute}
}

func (o *ingestOptions) flags(c *cobra.Command) {
	f := c.Flags()
	f.IntVar(&o.batch, "batch", o.batch, "events per NDJSON request")
	f.IntVar(&o.workers, "workers", o.workers, "concurrent requests")
	f.IntVar(&o.retries, "retries", o.retries, "re-sends of a request that failed, or of a FAILED_RETRYABLE event (same event_id), before giving up on it")
	f.DurationVar(&o.wait, "wait", o.wait, "how long one request waits for ack=processed before answering PERSISTED")
	f.DurationVar(&o.deadline, "deadline", o.deadline, "how long to poll events answered PERSISTED until they end PROCESSED or FAILED_FINAL")
	f.DurationVar(&o.giveUp, "give-up-after", o.giveUp, "stop with an error when no event has got an answer other than FAILED_RETRYABLE for this long")
}

// ingestReport is what happened to every event sent.
type ingestReport struct {
	Sent       int            `json:"events_sent"`
	Final      map[string]int `json:"final_status"`
	Duplicates int            `json:"duplicate_answers"`
	// Resent counts events sent again (same event_id), Retries the requests that
	// carried them, of which Failed were retries of a request that got no answer
	// per event (connection refused, a non-gale answer).
	Resent  int `json:"resent_events"`
	Retries int `json:"retried_requests"`
	Failed  int `json:"failed_requests"`
	// Problems are events that ended FAILED_FINAL (with the reason) or not final.
	Problems []ingest.Answer `json:"problems,omitempty"`
	Elapsed  time.Duration   `json:"-"`
}

// bad counts events that broke the promise: not finished (still PERSISTED or
// ACCEPTED, or retryable after every re-send), or FAILED_FINAL with no reason.
func (r *ingestReport) bad() int {
	n := r.Final["PERSISTED"] + r.Final["ACCEPTED"] + r.Final["FAILED_RETRYABLE"]
	for _, p := range r.Problems {
		if p.Status == ingest.FailedFinal && p.Error == "" {
			n++
		}
	}
	return n
}

// errNoProgress is what a run that stopped after --give-up-after wraps.
var errNoProgress = errors.New("no progress")

// inputFile is an input opened before anything is sent, so that a missing file is
// reported as such and not after a probe of the server.
type inputFile struct {
	name string
	r    io.ReadCloser
}

func openInputs(paths []string) ([]inputFile, error) {
	var in []inputFile
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			closeInputs(in)
			return nil, fmt.Errorf("input file: %w", err)
		}
		in = append(in, inputFile{p, f})
	}
	return in, nil
}

func closeInputs(in []inputFile) {
	for _, f := range in {
		f.r.Close()
	}
}

// ingestProgress says what happens as it happens: lines for what stays worth
// reading (a retry and why, every 10,000 events sent), and on a terminal a status
// line rewritten in place below them.
type ingestProgress struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	tty    bool
	shown  bool // a status line is on screen
	drawn  time.Time
}

func newIngestProgress(w io.Writer, prefix string) *ingestProgress {
	if w == nil {
		return nil
	}
	return &ingestProgress{w: w, prefix: prefix, tty: isTerminal(w)}
}

// say prints a line that stays.
func (p *ingestProgress) say(format string, a ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	fmt.Fprintf(p.w, p.prefix+": "+format+"\n", a...)
}

// status rewrites the terminal's status line, at most 10 times a second unless
// forced; it prints nothing when the output is no terminal.
func (p *ingestProgress) status(force bool, format string, a ...any) {
	if p == nil || !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); force || now.Sub(p.drawn) >= 100*time.Millisecond {
		fmt.Fprintf(p.w, "\r"+p.prefix+": "+format+"\033[K", a...)
		p.shown, p.drawn = true, now
	}
}

// end clears the status line.
func (p *ingestProgress) end() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
}

// clearLocked erases the status line, if one is shown.
func (p *ingestProgress) clearLocked() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// rate is n per second over d, or "" when d is too short to say.
func rate(n int, d time.Duration) string {
	if n <= 0 || d < time.Millisecond {
		return ""
	}
	return fmt.Sprintf(" (%.0f/s)", float64(n)/d.Seconds())
}

// idRange names a request's events for a progress line.
func idRange(evs []event.Event) string {
	if len(evs) == 1 {
		return evs[0].ID
	}
	return fmt.Sprintf("%s..%s", evs[0].ID, evs[len(evs)-1].ID)
}

// runIngest reads the CSV files as events and sends them in batches; requests that
// failed and answers that are FAILED_RETRYABLE are re-sent with the same ids, every
// retry said as it happens; answers still PERSISTED are polled until final or the
// deadline. It stops with an error wrapping errNoProgress when no event got an
// answer other than FAILED_RETRYABLE for o.giveUp. The files are closed.
func runIngest(parent context.Context, c *ingest.Client, files []inputFile, o ingestOptions, p *ingestProgress) (rep *ingestReport, err error) {
	start := time.Now()
	rep = &ingestReport{Final: map[string]int{}}
	defer func() { rep.Elapsed = time.Since(start) }()
	defer closeInputs(files)
	defer p.end()
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	var mu sync.Mutex // guards rep, pending, lastErr
	var pending []string
	var lastErr string
	var lastProgress atomic.Int64
	lastProgress.Store(time.Now().UnixNano())
	progressed := func() { lastProgress.Store(time.Now().UnixNano()) }
	showStatus := func(force bool) { // with mu held
		el := time.Since(start)
		p.status(force, "sent %d events, %d answered, %d re-sent in %d retried requests%s",
			rep.Sent, len(pending)+sum(rep.Final), rep.Resent, rep.Retries, rate(rep.Sent, el))
	}
	final := func(a ingest.Answer) {
		mu.Lock()
		defer mu.Unlock()
		rep.Final[a.Status.String()]++
		if a.Status != ingest.Processed {
			rep.Problems = append(rep.Problems, a)
		}
	}
	// The watchdog: no progress for o.giveUp stops everything.
	if o.giveUp > 0 {
		go func() {
			t := time.NewTicker(min(o.giveUp/10, time.Second))
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				if since := time.Since(time.Unix(0, lastProgress.Load())); since >= o.giveUp {
					mu.Lock()
					last := lastErr
					mu.Unlock()
					if last == "" {
						last = "none"
					}
					cancel(fmt.Errorf("%w for %v (--give-up-after): no event got an answer other than FAILED_RETRYABLE; the last error: %s",
						errNoProgress, since.Round(time.Second), last))
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
	batches := make(chan []event.Event, o.workers)
	var readErr error
	go func() {
		defer close(batches)
		var cur []event.Event
		for _, f := range files {
			err := orders.ScanCSV(f.r, filepath.Base(f.name), func(e event.Event) error {
				cur = append(cur, e)
				if len(cur) == o.batch {
					select {
					case batches <- cur:
					case <-ctx.Done():
						return ctx.Err()
					}
					cur = nil
				}
				return nil
			})
			if err != nil {
				if ctx.Err() == nil {
					readErr = fmt.Errorf("%s: %w", f.name, err)
				}
				return
			}
		}
		if len(cur) > 0 {
			select {
			case batches <- cur:
			case <-ctx.Done():
			}
		}
	}()
	var wg sync.WaitGroup
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if ctx.Err() != nil {
					continue // drain: the reader is told by ctx
				}
				mu.Lock()
				rep.Sent += len(b)
				mu.Unlock()
				send := b
				for try := 0; len(send) > 0; try++ {
					answers, code, err := c.Send(ctx, send, o.level, o.wait)
					if answers == nil {
						if ctx.Err() != nil {
							err = context.Cause(ctx)
						}
						mu.Lock()
						lastErr = err.Error()
						mu.Unlock()
						if try >= o.retries || ctx.Err() != nil {
							if ctx.Err() == nil {
								p.say("gave up on %s (%d events) after %d retries: %v", idRange(send), len(send), try, err)
							}
							for _, e := range send {
								final(ingest.Answer{EventID: e.ID, Status: ingest.FailedRetryable, Error: err.Error()})
							}
							break
						}
						wait := backoff(try)
						mu.Lock()
						rep.Retries++
						rep.Failed++
						rep.Resent += len(send)
						n := rep.Retries
						mu.Unlock()
						p.say("retry %d: request for %s (%d events) failed: %v; sending again in %v", n, idRange(send), len(send), err, wait)
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
						if a.Status != ingest.FailedRetryable {
							progressed()
						}
						switch a.Status {
						case ingest.Processed, ingest.FailedFinal:
							final(a)
						case ingest.FailedRetryable:
							if try >= o.retries || ctx.Err() != nil {
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
						wait := backoff(try)
						if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
							wait = max(wait, time.Second)
						}
						mu.Lock()
						rep.Retries++
						rep.Resent += len(again)
						lastErr = fmt.Sprintf("HTTP %d: %s", code, why)
						n := rep.Retries
						mu.Unlock()
						p.say("retry %d: %d events of %s answered FAILED_RETRYABLE (HTTP %d: %s); sending them again in %v",
							n, len(again), idRange(send), code, why, wait)
						sleep(wait)
					}
					send = again
				}
				mu.Lock()
				if rep.Sent/10000 != (rep.Sent-len(b))/10000 && p != nil && !p.tty {
					p.say("sent %d events", rep.Sent)
				}
				showStatus(false)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if readErr != nil {
		return rep, readErr
	}
	// Poll the events answered before they finished.
	deadline := time.Now().Add(o.deadline)
	for len(pending) > 0 && ctx.Err() == nil {
		var still []string
		var pollErr error
		for _, id := range pending {
			st, found, err := c.Status(ctx, id)
			if err != nil {
				pollErr = err
			}
			switch {
			case err != nil || !found || (st.Status != ingest.Processed && st.Status != ingest.FailedFinal):
				if time.Now().After(deadline) || ctx.Err() != nil {
					a := ingest.Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError}
					if err != nil {
						a.Error = err.Error()
					}
					final(a)
				} else {
					still = append(still, id)
				}
			default:
				progressed()
				final(ingest.Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError})
			}
		}
		mu.Lock()
		pending = still
		if pollErr != nil {
			lastErr = pollErr.Error()
		}
		showStatus(false)
		mu.Unlock()
		if pollErr != nil {
			p.say("polling %d events not yet final: %v", len(still), pollErr)
		}
		if len(pending) > 0 {
			sleep(100 * time.Millisecond)
		}
	}
	for _, id := range pending { // the run was stopped while polling
		final(ingest.Answer{EventID: id, Status: ingest.Persisted, Error: "not polled to the end: " + context.Cause(ctx).Error()})
	}
	sort.Slice(rep.Problems, func(i, j int) bool { return rep.Problems[i].EventID < rep.Problems[j].EventID })
	if parent.Err() != nil {
		return rep, parent.Err()
	}
	return rep, context.Cause(ctx)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func backoff(try int) time.Duration {
	return min(50*time.Millisecond<<min(try, 6), 2*time.Second)
}

func printIngestReport(w io.Writer, r *ingestReport) {
	fmt.Fprintf(w, "events sent: %d in %.2fs%s\n", r.Sent, r.Elapsed.Seconds(), rate(r.Sent, r.Elapsed))
	var keys []string
	for k := range r.Final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-17s %d\n", k, r.Final[k])
	}
	fmt.Fprintf(w, "duplicate answers (an id already known, nothing written): %d\n", r.Duplicates)
	fmt.Fprintf(w, "retried requests: %d (%d after the request failed), %d events re-sent (same event_id)\n",
		r.Retries, r.Failed, r.Resent)
	for i, p := range r.Problems {
		if i == 10 {
			fmt.Fprintf(w, "  ... %d more\n", len(r.Problems)-10)
			break
		}
		fmt.Fprintf(w, "  %s: %s after %d attempt(s): %s\n", p.EventID, p.Status, p.Attempts, p.Error)
	}
}

// probeServe checks that url is a gale serve: its /healthz answers 200 with
// {"status":"ok"}. Anything else (a 404 from another server, an HTML page) is
// refused at once, naming the URL and what it answered.
func probeServe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("--url %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no gale serve at %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var h struct {
		Status string `json:"status"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Status != "ok" {
		return fmt.Errorf("%s/healthz answered %s %.100q, not a gale serve's {\"status\":\"ok\"}: is --url right?",
			url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func ingestCmd() *cobra.Command {
	o := defaultIngestOptions()
	var (
		addr  string
		level string
		token string
	)
	c := &cobra.Command{
		Use:   "ingest FILE.csv...",
		Short: "Post every row of retail CSV files to a running gale serve and report each event's final status",
		Long: `Each CSV row becomes one event (event_id = file day and row number, so identical real
rows stay distinct events), sent in NDJSON batches at --ack (default processed).
A request that failed and FAILED_RETRYABLE answers are re-sent with the same event_id
(--retries times), each retry said on stderr as it happens (with a status line when
stderr is a terminal); answers still PERSISTED when a request's --wait ran out are
polled until PROCESSED or FAILED_FINAL. The files are opened before the server's
/healthz is asked, which must answer as a gale serve does. With no answer other than
FAILED_RETRYABLE for --give-up-after, it stops with an error (exit status 2).
Exit status 1 if any event ends neither PROCESSED nor FAILED_FINAL with a reason.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			lvl, err := ingest.ParseLevel(level)
			if err != nil {
				return err
			}
			o.level = lvl
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if token == "" {
				token = os.Getenv("GALE_TOKEN") // not the flag's default: --help would print it
			}
			c := &ingest.Client{URL: strings.TrimRight(addr, "/"), Token: token}
			in, err := openInputs(files)
			if err != nil {
				return err
			}
			// Fail fast when nothing, or something else, answers, rather than
			// retrying every batch.
			if err := probeServe(ctx, c.URL); err != nil {
				closeInputs(in)
				return err
			}
			rep, err := runIngest(ctx, c, in, o, newIngestProgress(cmd.ErrOrStderr(), "gale ingest"))
			printIngestReport(cmd.OutOrStdout(), rep)
			if err != nil {
				return err
			}
			if n := rep.bad(); n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "gale ingest: %d event(s) ended neither PROCESSED nor FAILED_FINAL with a reason\n", n)
				return exitError{1}
			}
			return nil
		},
	}
	c.Flags().StringVar(&addr, "url", "http://127.0.0.1:8080", "base URL of gale serve")
	c.Flags().StringVar(&level, "ack", "processed", "ack level: accepted, persisted or processed")
	c.Flags().StringVar(&token, "token", "", "bearer token for a gale serve with --tokens (scopes write:SOURCE and read; default $GALE_TOKEN)")
	o.flags(c)
	return c
}
