package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/ui"
)

func topCmd() *cobra.Command {
	var (
		window   string
		interval time.Duration
		once     bool
		token    string
	)
	c := &cobra.Command{
		Use:   "top [URL]",
		Short: "print a running topology's spout and bolt table live, from its web UI endpoint",
		Long: `Print Storm's component table of a running gale process, refreshed every --interval,
from the UI endpoint it serves: ` + "`gale wordcount --ui :8080`" + ` serves it at http://127.0.0.1:8080/,
` + "`gale serve`" + ` at http://127.0.0.1:8080/ui/. URL defaults to http://127.0.0.1:8080/.

Columns follow Storm's UI: emitted (emit calls), transferred (tuples sent to consumer
tasks), acked and failed (spouts: trees, with timeouts apart; bolts: inputs), complete,
execute and process latency in ms, and capacity (share of the window spent in Execute;
near 1 means the bolt needs more tasks).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := "http://127.0.0.1:8080/"
			if len(args) == 1 {
				raw = args[0]
			}
			if !strings.Contains(raw, "://") {
				raw = "http://" + raw
			}
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("URL %q: want http://HOST:PORT[/PATH/] of a gale UI", args[0])
			}
			if token == "" {
				token = u.Query().Get("token") // a URL copied from the browser
			}
			u.RawQuery, u.Fragment = "", ""
			if !strings.HasSuffix(u.Path, "/") {
				u.Path += "/"
			}
			base := u.String()
			if window != "10m" && window != "all" {
				return fmt.Errorf("--window %q: want 10m or all", window)
			}
			if interval < 100*time.Millisecond || interval > time.Hour {
				return fmt.Errorf("--interval %v: must be between 100ms and 1h", interval)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			client := &http.Client{Timeout: 10 * time.Second}
			var topo ui.TopologyView
			if err := fetch(ctx, client, base+"api/topology", token, &topo); err != nil {
				// gale serve has the UI under /ui/, next to the ingest API.
				if !errors.Is(err, errNotFound) || fetch(ctx, client, base+"ui/api/topology", token, &topo) != nil {
					return err
				}
				base += "ui/"
			}
			if topo.Name == "" || len(topo.Components) == 0 {
				return fmt.Errorf("%sapi/topology: not a gale UI (no topology name or components)", base)
			}
			out := cmd.OutOrStdout()
			live := !once && isTerminal(out)
			for {
				var t metrics.Table
				err := fetch(ctx, client, base+"api/stats?window="+window, token, &t)
				if err == nil && t.Window != window {
					err = fmt.Errorf("%sapi/stats: not a gale UI answer (window %q)", base, t.Window)
				}
				switch {
				case ctx.Err() != nil:
					return nil
				case err != nil && once:
					return err
				case err != nil:
					// Live: a process restarting or a slow answer is shown, not fatal.
					fmt.Fprintf(out, "%s gale top: %v (retrying every %v)\n", time.Now().Format("15:04:05"), err, interval)
				default:
					if live {
						fmt.Fprint(out, "\033[H\033[2J")
					}
					renderTop(out, topo.Name, base, t, time.Now())
				}
				if once {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
				if !live {
					fmt.Fprintln(out)
				}
			}
		},
	}
	f := c.Flags()
	f.StringVar(&window, "window", "10m", "10m (the last 10 minutes) or all (since start)")
	f.DurationVar(&interval, "interval", 2*time.Second, "refresh interval")
	f.BoolVar(&once, "once", false, "print the table once and exit")
	f.StringVar(&token, "token", "", "the UI token, if the process was started with --ui-token")
	return c
}

var errNotFound = errors.New("404 not found")

// fetch GETs a JSON document, naming the URL and the reason when it cannot.
func fetch(ctx context.Context, c *http.Client, url, token string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach %s (is a gale process serving its UI there?): %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%s: token required or wrong: pass --token", url)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w (is this a gale UI? gale serve has it at /ui/)", url, errNotFound)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: %s: %.200s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s: not a gale UI answer: %w", url, err)
	}
	return nil
}

func lat(l *metrics.Latency) string {
	if l == nil || l.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f/%.3f", l.P50, l.P99)
}

// renderTop prints the table as Storm's UI shows it.
func renderTop(w io.Writer, name, base string, t metrics.Table, now time.Time) {
	fmt.Fprintf(w, "gale top: %s at %s, window %s (%.0f s), %s\n\n", name, base, t.Window, t.Seconds, now.Format("15:04:05"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "SPOUT\tTASKS\tEMITTED\tTRANSFERRED\tACKED\tFAILED\tTIMED OUT\tPENDING\tCOMPLETE ms p50/p99\t")
	for _, s := range t.Spouts {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", s.ID, s.Tasks, s.Emitted, s.Transferred,
			s.Acked, s.Failed, s.TimedOut, s.Pending, lat(s.CompleteLatency))
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t\t")
	fmt.Fprintln(tw, "BOLT\tTASKS\tEXECUTED\tCAPACITY\tEXECUTE ms p50/p99\tPROCESS ms p50/p99\tACKED\tFAILED\tEMITTED\tTRANSFERRED\tQUEUE\t")
	for _, b := range t.Bolts {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.3f\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t\n", b.ID, b.Tasks, b.Executed, b.Capacity,
			lat(b.ExecuteLatency), lat(b.ProcessLatency), b.Acked, b.Failed, b.Emitted, b.Transferred, b.QueueDepth)
	}
	tw.Flush()
	a := t.Acker
	fmt.Fprintf(w, "\nacker: %s, %d trees pending, %d completed, %d failed, %d expired, %d unmatched acks held, %d orphans dropped\n",
		plural(a.Tasks, "task"), a.Pending, a.Completed, a.Failed, a.Expired, a.Unmatched, a.Orphans)
	kinds := make([]string, 0, len(t.Misuse))
	for k := range t.Misuse {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(w, "misuse: %s %d\n", k, t.Misuse[k])
	}
	for _, s := range t.Spouts {
		if s.LastError != "" {
			fmt.Fprintf(w, "last error of %s: %s\n", s.ID, s.LastError)
		}
	}
	for _, b := range t.Bolts {
		if b.LastError != "" {
			fmt.Fprintf(w, "last error of %s: %s\n", b.ID, b.LastError)
		}
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
