package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/examples/orders"
	"github.com/gale-stream/gale/ingest"
)

type ingestOptions struct {
	batch, workers, retries int
	level                   ingest.Level
	wait, deadline          time.Duration
}

func defaultIngestOptions() ingestOptions {
	return ingestOptions{batch: 500, workers: 4, retries: 10, level: ingest.LevelProcessed,
		wait: 30 * time.Second, deadline: 2 * time.Minute}
}

func (o *ingestOptions) flags(c *cobra.Command) {
	f := c.Flags()
	f.IntVar(&o.batch, "batch", o.batch, "events per NDJSON request")
	f.IntVar(&o.workers, "workers", o.workers, "concurrent requests")
	f.IntVar(&o.retries, "retries", o.retries, "re-sends of a FAILED_RETRYABLE event (same event_id) before giving up")
	f.DurationVar(&o.wait, "wait", o.wait, "how long one request waits for ack=processed before answering PERSISTED")
	f.DurationVar(&o.deadline, "deadline", o.deadline, "how long to poll events answered PERSISTED until they end PROCESSED or FAILED_FINAL")
}

// ingestReport is what happened to every event sent.
type ingestReport struct {
	Sent       int            `json:"events_sent"`
	Final      map[string]int `json:"final_status"`
	Duplicates int            `json:"duplicate_answers"`
	Resent     int            `json:"resent_retryable"`
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

// runIngest reads the CSV files as events and sends them in batches; answers that
// are FAILED_RETRYABLE are re-sent with the same ids, answers still PERSISTED are
// polled until final or the deadline.
func runIngest(ctx context.Context, c *ingest.Client, files []string, o ingestOptions, progress io.Writer) (*ingestReport, error) {
	start := time.Now()
	rep := &ingestReport{Final: map[string]int{}}
	var mu sync.Mutex
	var pending []string
	final := func(a ingest.Answer) {
		mu.Lock()
		defer mu.Unlock()
		rep.Final[a.Status.String()]++
		if a.Status != ingest.Processed {
			rep.Problems = append(rep.Problems, a)
		}
	}
	batches := make(chan []event.Event, o.workers)
	var readErr error
	go func() {
		defer close(batches)
		var cur []event.Event
		for _, p := range files {
			f, err := os.Open(p)
			if err != nil {
				readErr = err
				return
			}
			err = orders.ScanCSV(f, filepath.Base(p), func(e event.Event) error {
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
			f.Close()
			if err != nil {
				readErr = err
				return
			}
		}
		if len(cur) > 0 {
			batches <- cur
		}
	}()
	var wg sync.WaitGroup
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				mu.Lock()
				rep.Sent += len(b)
				mu.Unlock()
				send := b
				for try := 0; len(send) > 0; try++ {
					answers, code, err := c.Send(ctx, send, o.level, o.wait)
					if answers == nil {
						if try >= o.retries || ctx.Err() != nil {
							for _, e := range send {
								final(ingest.Answer{EventID: e.ID, Status: ingest.FailedRetryable, Error: err.Error()})
							}
							break
						}
						time.Sleep(backoff(try))
						continue
					}
					var again []event.Event
					for i, a := range answers {
						if a.Duplicate {
							mu.Lock()
							rep.Duplicates++
							mu.Unlock()
						}
						switch a.Status {
						case ingest.Processed, ingest.FailedFinal:
							final(a)
						case ingest.FailedRetryable:
							if try >= o.retries {
								final(a)
							} else {
								again = append(again, send[i])
							}
						default:
							mu.Lock()
							pending = append(pending, a.EventID)
							mu.Unlock()
						}
					}
					if len(again) > 0 {
						mu.Lock()
						rep.Resent += len(again)
						mu.Unlock()
						wait := backoff(try)
						if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
							wait = max(wait, time.Second)
						}
						time.Sleep(wait)
					}
					send = again
				}
				if progress != nil {
					mu.Lock()
					if rep.Sent/10000 != (rep.Sent-len(b))/10000 {
						fmt.Fprintf(progress, "sent %d events\n", rep.Sent)
					}
					mu.Unlock()
				}
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
		for _, id := range pending {
			st, found, err := c.Status(ctx, id)
			switch {
			case err != nil || !found || (st.Status != ingest.Processed && st.Status != ingest.FailedFinal):
				if time.Now().After(deadline) {
					a := ingest.Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError}
					if err != nil {
						a.Error = err.Error()
					}
					final(a)
				} else {
					still = append(still, id)
				}
			default:
				final(ingest.Answer{EventID: id, Status: st.Status, Seq: st.Seq, Attempts: st.Attempts, Error: st.LastError})
			}
		}
		pending = still
		if len(pending) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	rep.Elapsed = time.Since(start)
	sort.Slice(rep.Problems, func(i, j int) bool { return rep.Problems[i].EventID < rep.Problems[j].EventID })
	return rep, ctx.Err()
}

func backoff(try int) time.Duration {
	return min(50*time.Millisecond<<min(try, 6), 2*time.Second)
}

func printIngestReport(w io.Writer, r *ingestReport) {
	fmt.Fprintf(w, "events sent: %d in %.2fs (%.0f/s)\n", r.Sent, r.Elapsed.Seconds(), float64(r.Sent)/r.Elapsed.Seconds())
	var keys []string
	for k := range r.Final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-17s %d\n", k, r.Final[k])
	}
	fmt.Fprintf(w, "duplicate answers (an id already known, nothing written): %d\n", r.Duplicates)
	fmt.Fprintf(w, "re-sent after FAILED_RETRYABLE (same event_id): %d\n", r.Resent)
	for i, p := range r.Problems {
		if i == 10 {
			fmt.Fprintf(w, "  ... %d more\n", len(r.Problems)-10)
			break
		}
		fmt.Fprintf(w, "  %s: %s after %d attempt(s): %s\n", p.EventID, p.Status, p.Attempts, p.Error)
	}
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
		Short: "post every row of retail CSV files to a running gale serve and report each event's final status",
		Long: `Each CSV row becomes one event (event_id = file day and row number, so identical real
rows stay distinct events), sent in NDJSON batches at --ack (default processed).
FAILED_RETRYABLE answers are re-sent with the same event_id; answers still PERSISTED
when a request's --wait ran out are polled until PROCESSED or FAILED_FINAL.
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
			// Fail fast when nothing answers, rather than retrying every batch.
			if resp, err := http.Get(c.URL + "/healthz"); err != nil {
				return fmt.Errorf("no gale serve at %s: %w", c.URL, err)
			} else {
				resp.Body.Close()
			}
			rep, err := runIngest(ctx, c, files, o, cmd.ErrOrStderr())
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
