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
	"time"
	"unicode/utf8"

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
near 1 means the bolt needs more tasks). The output fits 80 columns: counts of a
million and more are shown to 3 significant digits (1.23M; the web UI and /metrics
have them exact), and a name longer than 14 characters gets a line of its own.`,
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
				if !errors.Is(err, errNotFound) {
					return err
				}
				// gale serve has the UI under /ui/, next to the ingest API: what
				// that answers (a token refused, say) is the news, not the 404.
				if err2 := fetch(ctx, client, base+"ui/api/topology", token, &topo); err2 != nil {
					if errors.Is(err2, errNotFound) {
						return err
					}
					return err2
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
	case (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) && token == "":
		return fmt.Errorf("%s: %s: the UI needs a token: --token TOKEN (the one given to --ui-token)", url, resp.Status)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: %s: the UI refused the token given with --token", url, resp.Status)
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
	return shortMs(l.P50) + "/" + shortMs(l.P99)
}

// shortMs prints milliseconds in at most 5 characters, so a latency cell stays narrow.
func shortMs(v float64) string {
	switch {
	case v < 9.995:
		return fmt.Sprintf("%.2f", v)
	case v < 99.95:
		return fmt.Sprintf("%.1f", v)
	case v < 99999.5:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.0fs", v/1000)
}

// count prints n exactly below a million and to 3 significant digits above (1.23M,
// 45.6G), at most 6 characters, so that the tables fit 80 columns.
func count[N int | uint64](n N) string {
	v := float64(n)
	if v < 1e6 {
		return fmt.Sprint(n)
	}
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e6, "M"}, {1e9, "G"}, {1e12, "T"}} {
		if x := v / u.div; x < 999.5 {
			switch {
			case x < 9.995:
				return fmt.Sprintf("%.2f%s", x, u.unit)
			case x < 99.95:
				return fmt.Sprintf("%.1f%s", x, u.unit)
			}
			return fmt.Sprintf("%.0f%s", x, u.unit)
		}
	}
	return fmt.Sprintf("%.0fT", v/1e12)
}

// topWidth is the terminal width gale top's output fits in, and topName the widest
// component name kept in its row: a longer one gets a line of its own.
const (
	topWidth = 80
	topName  = 14
)

// renderTop prints Storm's tables in 80 columns: counts, then latencies and capacity.
func renderTop(w io.Writer, name, base string, t metrics.Table, now time.Time) {
	fmt.Fprintf(w, "gale top: %s, window %s (%.0f s), %s\n", name, t.Window, t.Seconds, now.Format("15:04:05"))
	fmt.Fprintf(w, "from %s\n\n", base)
	spouts := [][]string{{"SPOUT", "TASKS", "EMITTED", "TRANSFERRED", "ACKED", "FAILED", "TIMED OUT", "PENDING"}}
	for _, s := range t.Spouts {
		spouts = append(spouts, []string{s.ID, count(s.Tasks), count(s.Emitted), count(s.Transferred),
			count(s.Acked), count(s.Failed), count(s.TimedOut), count(s.Pending)})
	}
	writeTable(w, spouts)
	fmt.Fprintln(w)
	bolts := [][]string{{"BOLT", "TASKS", "EXECUTED", "ACKED", "FAILED", "EMITTED", "TRANSFERRED", "QUEUE"}}
	for _, b := range t.Bolts {
		bolts = append(bolts, []string{b.ID, count(b.Tasks), count(b.Executed), count(b.Acked), count(b.Failed),
			count(b.Emitted), count(b.Transferred), count(b.QueueDepth)})
	}
	writeTable(w, bolts)
	fmt.Fprintln(w)
	lats := [][]string{{"ms p50/p99", "COMPLETE", "EXECUTE", "PROCESS", "CAPACITY"}}
	for _, s := range t.Spouts {
		lats = append(lats, []string{s.ID, lat(s.CompleteLatency), "", "", ""})
	}
	for _, b := range t.Bolts {
		lats = append(lats, []string{b.ID, "", lat(b.ExecuteLatency), lat(b.ProcessLatency), fmt.Sprintf("%.3f", b.Capacity)})
	}
	writeTable(w, lats)
	a := t.Acker
	fmt.Fprintf(w, "\nacker: %s, %s trees pending, %s completed, %s failed, %s expired\n",
		plural(a.Tasks, "task"), count(a.Pending), count(a.Completed), count(a.Failed), count(a.Expired))
	fmt.Fprintf(w, "acker: %s unmatched acks held, %s orphans dropped\n", count(a.Unmatched), count(a.Orphans))
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
			writeWrapped(w, "last error of "+s.ID+": "+s.LastError)
		}
	}
	for _, b := range t.Bolts {
		if b.LastError != "" {
			writeWrapped(w, "last error of "+b.ID+": "+b.LastError)
		}
	}
}

// writeTable prints rows with the first column left-aligned and the others right-
// aligned, two spaces apart. A first cell wider than topName is printed on a line
// of its own, and its row's values on the next.
func writeTable(w io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			if n := utf8.RuneCountInString(c); (i > 0 || n <= topName) && n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, r := range rows {
		var b strings.Builder
		first := r[0]
		if utf8.RuneCountInString(first) > topName {
			fmt.Fprintln(w, first)
			first = ""
		}
		b.WriteString(first + strings.Repeat(" ", widths[0]-utf8.RuneCountInString(first)))
		for i, c := range r[1:] {
			b.WriteString(strings.Repeat(" ", 2+widths[i+1]-utf8.RuneCountInString(c)) + c)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// writeWrapped prints s in lines of at most topWidth columns, broken at spaces
// (a word longer than a line is cut), continued lines indented by two.
func writeWrapped(w io.Writer, s string) {
	line, indent := "", ""
	for _, word := range strings.Fields(s) {
		for utf8.RuneCountInString(indent+word) > topWidth {
			if line != "" {
				fmt.Fprintln(w, line)
				line = ""
			}
			r := []rune(word)
			n := topWidth - utf8.RuneCountInString(indent)
			fmt.Fprintln(w, indent+string(r[:n]))
			word, indent = string(r[n:]), "  "
		}
		switch {
		case line == "":
			line = indent + word
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) <= topWidth:
			line += " " + word
		default:
			fmt.Fprintln(w, line)
			indent = "  "
			line = indent + word
		}
	}
	if line != "" {
		fmt.Fprintln(w, line)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
