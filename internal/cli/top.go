package cli

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
		Short: "Print a running topology's spout and bolt table live, from its web UI endpoint",
		Long: `Print Storm's component table of a running gale process, refreshed every --interval,
from the UI endpoint it serves: ` + "`gale wordcount --ui 127.0.0.1:8080`" + ` serves it at http://127.0.0.1:8080/,
` + "`gale serve`" + ` at http://127.0.0.1:8080/ui/, ` + "`gale worker --ui 127.0.0.1:8080`" + ` at http://127.0.0.1:8080/
(add ?topology=NAME for another topology of the worker). URL defaults to
http://127.0.0.1:8080/.

From a worker, the counts are every worker's (the UI gathers them), and the
cluster's workers come first: host, pid, uptime, heartbeat age, slots, the
generation each runs and its tasks (* marks the worker serving the UI), then the
worker of each component's tasks.

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
			sel := u.Query().Get("topology") // a worker's other topology
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
			if err := fetch(ctx, client, withTopology(base+"api/topology", sel), token, &topo); err != nil {
				if !errors.Is(err, errNotFound) {
					return err
				}
				// gale serve has the UI under /ui/, next to the ingest API: what
				// that answers (a token refused, say) is the news, not the 404.
				if err2 := fetch(ctx, client, withTopology(base+"ui/api/topology", sel), token, &topo); err2 != nil {
					if errors.Is(err2, errNotFound) {
						return err
					}
					return err2
				}
				base += "ui/"
			}
			// A worker's UI (gale worker --ui) has a cluster view, and may run no
			// generation of its topology at the moment (idle): no components then.
			if !topo.Cluster && (topo.Name == "" || len(topo.Components) == 0) {
				return fmt.Errorf("%sapi/topology: not a gale UI (no topology name or components)", base)
			}
			out := cmd.OutOrStdout()
			live := !once && IsTerminal(out)
			for {
				f, err := fetchFrame(ctx, client, base, sel, token, window, topo)
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
					renderFrame(out, base, f, time.Now())
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

// topFrame is what one refresh of gale top shows.
type topFrame struct {
	name string
	// stats is the component table; nil when the worker runs no generation of the
	// topology now (idle says why).
	stats *ui.StatsView
	idle  string
	// cluster is a worker's view of the cluster (nil for a process alone, or an
	// older UI); clusterErr why it could not be read.
	cluster    *ui.ClusterView
	clusterErr error
}

// fetchFrame reads one refresh: the stats, and from a worker's UI the topology
// (which may have become idle, or running again) and the cluster.
func fetchFrame(ctx context.Context, client *http.Client, base, sel, token, window string, topo ui.TopologyView) (topFrame, error) {
	f := topFrame{name: topo.Name}
	if topo.Cluster {
		var now ui.TopologyView
		if err := fetch(ctx, client, withTopology(base+"api/topology", sel), token, &now); err != nil {
			return f, err
		}
		f.name = now.Name
		var cl ui.ClusterView
		if err := fetch(ctx, client, withTopology(base+"api/cluster", sel), token, &cl); err != nil {
			f.clusterErr = err // the stats are still worth showing
		} else {
			f.cluster = &cl
		}
		if now.Idle {
			f.idle = now.Note
			return f, nil
		}
	}
	var t ui.StatsView
	if err := fetch(ctx, client, withTopology(base+"api/stats?window="+window, sel), token, &t); err != nil {
		return f, err
	}
	if t.Window != window {
		return f, fmt.Errorf("%sapi/stats: not a gale UI answer (window %q)", base, t.Window)
	}
	f.stats = &t
	return f, nil
}

// withTopology adds ?topology=sel to an API URL (a worker's UI picks the topology
// by it); sel "" leaves it as is.
func withTopology(u, sel string) string {
	if sel == "" {
		return u
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "topology=" + url.QueryEscape(sel)
}

// renderFrame prints a refresh: the header, the cluster's workers (a worker's
// UI), then Storm's tables.
func renderFrame(w io.Writer, base string, f topFrame, now time.Time) {
	name := f.name
	if name == "" {
		name = "(no topology)"
	}
	if f.stats == nil {
		fmt.Fprintf(w, "gale top: %s, %s\n", name, now.Format("15:04:05"))
		fmt.Fprintf(w, "from %s\n", base)
	} else {
		topHeader(w, name, base, f.stats.Table, now)
	}
	if f.cluster != nil {
		fmt.Fprintln(w)
		renderWorkers(w, f.cluster, now)
	} else if f.clusterErr != nil {
		fmt.Fprintln(w)
		writeWrapped(w, "cluster: "+f.clusterErr.Error())
	}
	if f.stats == nil {
		fmt.Fprintln(w)
		writeWrapped(w, f.idle)
		return
	}
	if f.stats.Partial {
		fmt.Fprintln(w)
		writeWrapped(w, "note: "+f.stats.Note)
	}
	fmt.Fprintln(w)
	renderTables(w, f.stats.Table)
}

// renderWorkers prints a worker's view of the cluster: a summary line, the
// workers, and the worker of each component's tasks.
func renderWorkers(w io.Writer, cl *ui.ClusterView, now time.Time) {
	sum := "cluster: "
	if cl.Topology != "" {
		sum += fmt.Sprintf("%s %s, generation %d", cl.Topology, cl.State, cl.Generation)
	} else {
		sum += "no topology on this worker"
	}
	if cl.Scheduler != nil {
		sum += ", scheduler " + cl.Scheduler.Holder
	} else {
		sum += ", no scheduler"
	}
	writeWrapped(w, sum+", UI of worker "+cl.Self)
	if cl.Error != "" {
		writeWrapped(w, "last request refused: "+cl.Error)
	}
	rows := [][]string{{"WORKER", "HOST", "PID", "UPTIME", "BEAT", "SLOTS", "RUNNING", "TASKS"}}
	for _, wv := range cl.Workers {
		name := wv.Name
		if wv.Self {
			name += "*"
		}
		if !wv.Live {
			rows = append(rows, []string{name, "lost", "-", "-", "expired", "-", "-", clip(intList(wv.Tasks), 16)})
			continue
		}
		run := "-"
		if wv.Generation != 0 {
			run = fmt.Sprintf("g%d", wv.Generation)
		}
		rows = append(rows, []string{name, clip(wv.Host, 16), fmt.Sprint(wv.PID),
			shortDuration(time.Duration(wv.UptimeSeconds * float64(time.Second))),
			fmt.Sprintf("%.1fs", wv.HeartbeatAgeSeconds), fmt.Sprint(wv.Slots), run, clip(dash(intList(wv.Tasks)), 16)})
	}
	writeTable(w, rows)
	for _, wv := range cl.Workers {
		if wv.Refused != "" {
			writeWrapped(w, "refused by "+wv.Name+": "+wv.Refused)
		}
	}
	if len(cl.Components) > 0 {
		fmt.Fprintln(w)
		place := [][]string{{"COMPONENT", "WORKER[TASKS]"}}
		for _, c := range cl.Components {
			var order []string
			by := map[string][]int{}
			for _, t := range c.Tasks {
				wk := t.Worker
				if wk == "" {
					wk = "none"
				}
				if _, ok := by[wk]; !ok {
					order = append(order, wk)
				}
				by[wk] = append(by[wk], t.Task)
			}
			var parts []string
			for _, wk := range order {
				parts = append(parts, fmt.Sprintf("%s[%s]", wk, intList(by[wk])))
			}
			place = append(place, []string{c.ID, clip(strings.Join(parts, " "), topWidth-topName-2)})
		}
		writeLeft(w, place)
	}
}

// intList prints ids separated by spaces.
func intList(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, " ")
}

// clip cuts s to n characters, the last one an ellipsis.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// shortDuration prints a duration in at most 7 characters: 45s, 12m05s, 3h04m, 5d02h.
func shortDuration(d time.Duration) string {
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s/60%60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s/3600%24)
}

// writeLeft prints rows of two columns, both left-aligned, the first at most
// topName wide (a longer name gets a line of its own).
func writeLeft(w io.Writer, rows [][]string) {
	width := 0
	for _, r := range rows {
		if n := utf8.RuneCountInString(r[0]); n <= topName && n > width {
			width = n
		}
	}
	for _, r := range rows {
		first := r[0]
		if utf8.RuneCountInString(first) > topName {
			fmt.Fprintln(w, first)
			first = ""
		}
		fmt.Fprintln(w, strings.TrimRight(first+strings.Repeat(" ", width-utf8.RuneCountInString(first)+2)+r[1], " "))
	}
}

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
	topHeader(w, name, base, t, now)
	fmt.Fprintln(w)
	renderTables(w, t)
}

func topHeader(w io.Writer, name, base string, t metrics.Table, now time.Time) {
	fmt.Fprintf(w, "gale top: %s, window %s (%.0f s), %s\n", name, t.Window, t.Seconds, now.Format("15:04:05"))
	fmt.Fprintf(w, "from %s\n", base)
}

// renderTables prints the spout, bolt and latency tables and the acker's lines.
func renderTables(w io.Writer, t metrics.Table) {
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
