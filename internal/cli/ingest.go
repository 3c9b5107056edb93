package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
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
	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/pipelines/orders"
)

// ingestFlags binds the flags of how events are sent (gale ingest, gale orders) to
// o, whose values are their defaults.
func IngestFlags(c *cobra.Command, o *ingest.SendOptions) {
	f := c.Flags()
	f.IntVar(&o.Batch, "batch", o.Batch, "events per NDJSON request")
	f.IntVar(&o.Workers, "workers", o.Workers, "concurrent requests")
	f.IntVar(&o.Retries, "retries", o.Retries, "re-sends of a request that failed, or of a FAILED_RETRYABLE event (same event_id), before giving up on it")
	f.DurationVar(&o.Wait, "wait", o.Wait, "how long one request waits for ack=processed before answering PERSISTED")
	f.DurationVar(&o.Deadline, "deadline", o.Deadline, "how long to poll events answered PERSISTED until they end PROCESSED or FAILED_FINAL")
	f.DurationVar(&o.GiveUp, "give-up-after", o.GiveUp, "stop with an error when no event has got an answer other than FAILED_RETRYABLE for this long")
}

// checkIngestFlags refuses what SendAll would, naming the flag, before any file is
// opened or server asked.
func CheckIngestFlags(o ingest.SendOptions) error {
	err := o.Check()
	var oe *ingest.OptionError
	if errors.As(err, &oe) {
		if flag, ok := ingestFlagOf[oe.Field]; ok {
			return fmt.Errorf("--%s %v: %s", flag, oe.Value, oe.Want)
		}
	}
	return err
}

// ingestFlagOf names the flag of each field of ingest.SendOptions IngestFlags binds.
var ingestFlagOf = map[string]string{"Batch": "batch", "Workers": "workers", "Retries": "retries",
	"Wait": "wait", "Deadline": "deadline", "GiveUp": "give-up-after"}

// inputFile is an input opened before anything is sent, so that a missing file is
// reported as such and not after a probe of the server.
type InputFile struct {
	name string
	r    io.ReadCloser
}

func OpenInputs(paths []string) ([]InputFile, error) {
	var in []InputFile
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			CloseInputs(in)
			return nil, fmt.Errorf("input file: %w", err)
		}
		in = append(in, InputFile{p, f})
	}
	return in, nil
}

func CloseInputs(in []InputFile) {
	for _, f := range in {
		f.r.Close()
	}
}

// ingestProgress says what happens as it happens: lines for what stays worth
// reading (a retry and why, every 10,000 events sent), and on a terminal a status
// line rewritten in place below them.
type IngestProgress struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	tty    bool
	shown  bool // a status line is on screen
	drawn  time.Time
}

func NewIngestProgress(w io.Writer, prefix string) *IngestProgress {
	if w == nil {
		return nil
	}
	return &IngestProgress{w: w, prefix: prefix, tty: IsTerminal(w)}
}

// say prints a line that stays.
func (p *IngestProgress) say(format string, a ...any) {
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
func (p *IngestProgress) status(force bool, format string, a ...any) {
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
func (p *IngestProgress) end() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
}

// clearLocked erases the status line, if one is shown.
func (p *IngestProgress) clearLocked() {
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
func idRange(p ingest.Progress) string {
	if p.Request == 1 {
		return p.FirstID
	}
	return fmt.Sprintf("%s..%s", p.FirstID, p.LastID)
}

// report prints a step of the run: a retry and why, a request given up, a failed
// poll, every 10,000 events sent when the output is no terminal, and the status
// line on one.
func (p *IngestProgress) report(e ingest.Progress) {
	switch e.Kind {
	case ingest.ProgressGaveUp:
		p.say("gave up on %s (%d events) after %d retries: %v", idRange(e), e.Request, e.Tries, e.Err)
	case ingest.ProgressRetryRequest:
		p.say("retry %d: request for %s (%d events) failed: %v; sending again in %v", e.Retry, idRange(e), e.Request, e.Err, e.Wait)
	case ingest.ProgressRetryEvents:
		p.say("retry %d: %d events of %s answered FAILED_RETRYABLE (HTTP %d: %s); sending them again in %v",
			e.Retry, e.Events, idRange(e), e.HTTPStatus, e.Reason, e.Wait)
	case ingest.ProgressBatch:
		if e.Sent/10000 != (e.Sent-e.Batch)/10000 && !p.tty {
			p.say("sent %d events", e.Sent)
		}
		p.showStatus(e)
	case ingest.ProgressPoll:
		p.showStatus(e)
		if e.Err != nil {
			p.say("polling %d events not yet final: %v", e.Events, e.Err)
		}
	}
}

// showStatus rewrites the status line with the run's counts.
func (p *IngestProgress) showStatus(e ingest.Progress) {
	p.status(false, "sent %d events, %d answered, %d re-sent in %d retried requests%s",
		e.Sent, e.Answered, e.Resent, e.Retries, rate(e.Sent, e.Elapsed))
}

// csvEvents reads the CSV files as events (orders.ScanCSV: event_id = file day and
// row number), one after the other; an error names the file.
func csvEvents(files []InputFile) iter.Seq2[event.Event, error] {
	return func(yield func(event.Event, error) bool) {
		stop := errors.New("stop")
		for _, f := range files {
			err := orders.ScanCSV(f.r, filepath.Base(f.name), func(e event.Event) error {
				if !yield(e, nil) {
					return stop
				}
				return nil
			})
			if errors.Is(err, stop) {
				return
			}
			if err != nil {
				yield(event.Event{}, fmt.Errorf("%s: %w", f.name, err))
				return
			}
		}
	}
}

// runIngest sends the CSV files' events with c.SendAll (its resend, backoff and
// poll rules), each step said on p, and closes the files. A run stopped for want
// of progress says it was --give-up-after.
func RunIngest(ctx context.Context, c *ingest.Client, files []InputFile, o ingest.SendOptions, p *IngestProgress) (*ingest.Report, error) {
	defer CloseInputs(files)
	defer p.end()
	if p != nil {
		o.Progress = p.report
	}
	rep, err := c.SendAll(ctx, csvEvents(files), o)
	if errors.Is(err, ingest.ErrNoProgress) {
		err = fmt.Errorf("--give-up-after %v: %w", o.GiveUp, err)
	}
	return rep, err
}

func PrintIngestReport(w io.Writer, r *ingest.Report) {
	fmt.Fprintf(w, "events sent: %d in %.2fs%s\n", r.Sent, r.Elapsed.Seconds(), rate(r.Sent, r.Elapsed))
	var keys []string
	for k := range r.Final {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-17s %d\n", k, r.Final[k])
	}
	if r.Unsent > 0 {
		fmt.Fprintf(w, "read but never sent (the run stopped first): %d\n", r.Unsent)
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

func IngestCmd() *cobra.Command {
	o := ingest.DefaultSendOptions()
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
			if err := CheckIngestFlags(o); err != nil {
				return err
			}
			lvl, err := ingest.ParseLevel(level)
			if err != nil {
				return err
			}
			o.Level = lvl
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if token == "" {
				token = os.Getenv("GALE_TOKEN") // not the flag's default: --help would print it
			}
			c := &ingest.Client{URL: strings.TrimRight(addr, "/"), Token: token}
			in, err := OpenInputs(files)
			if err != nil {
				return err
			}
			// Fail fast when nothing, or something else, answers, rather than
			// retrying every batch.
			if err := probeServe(ctx, c.URL); err != nil {
				CloseInputs(in)
				return err
			}
			rep, err := RunIngest(ctx, c, in, o, NewIngestProgress(cmd.ErrOrStderr(), "gale ingest"))
			PrintIngestReport(cmd.OutOrStdout(), rep)
			if err != nil {
				return err
			}
			if n := rep.Broken(); n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "gale ingest: %d event(s) ended neither PROCESSED nor FAILED_FINAL with a reason\n", n)
				return ExitError{1}
			}
			return nil
		},
	}
	c.Flags().StringVar(&addr, "url", "http://127.0.0.1:8080", "base URL of gale serve")
	c.Flags().StringVar(&level, "ack", "processed", "ack level: accepted, persisted or processed")
	c.Flags().StringVar(&token, "token", "", "bearer token for a gale serve with --tokens (scopes write:SOURCE and read; default $GALE_TOKEN)")
	IngestFlags(c, &o)
	return c
}
