package ui

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/lineage"
	"github.com/gale-stream/gale/metrics"
)

//go:embed assets
var assets embed.FS

// Options configure a UI.
type Options struct {
	// Name is the topology's name, shown in the title and as the metrics' topology
	// label.
	Name string
	// Runtime is the running topology.
	Runtime *engine.Runtime
	// History feeds the windows and charts; New makes one if nil (Start runs it).
	History *metrics.History
	// Token, if set, is required on every request: "Authorization: Bearer TOKEN", or
	// ?token=TOKEN for a browser.
	Token string
	// Registry, if set, also gets the topology's collector and is what /metrics
	// serves (for processes with metrics of their own); default a new registry.
	Registry *prometheus.Registry
	// Ingest, if set, is the ingest path in front of the topology (gale serve's): the
	// page then shows its statuses, rates, fsync latency and dead letters, and the
	// lookup takes an event id.
	Ingest Ingest
	// Cluster, if set, is the cluster the topology runs on (gale worker's): the page
	// then shows its cluster section (GET /api/cluster), and with a Token the
	// actions (POST /api/cluster/{action}). Runtime may then be nil: the process
	// runs no generation of the topology now (SetRuntime gives it one).
	Cluster Cluster
	// ConstLabels, if set, are added to every metric the UI registers (gale worker:
	// worker=NAME, so that the metrics of each process of a topology are told apart).
	ConstLabels prometheus.Labels
	// StatsTimeout bounds how long /api/stats and the History wait for the other
	// processes of the topology to send their stats (Runtime.ClusterStats); default
	// 1 s. A process alone answers at once.
	StatsTimeout time.Duration
}

// UI serves the web UI, its JSON API and /metrics for one topology. It is read-only
// (every route is GET or HEAD) except for the cluster's actions, which need
// Options.Cluster and a Token.
type UI struct {
	o       Options
	mux     *http.ServeMux
	metrics http.Handler
	rates   ingestRates

	mu      sync.Mutex
	cur     *generation   // nil: no runtime now
	swapped chan struct{} // closed (and replaced) by SetRuntime
}

// generation is one runtime the UI reads, with what is kept of it: engines start
// their counters from zero, so each has its own History.
type generation struct {
	rt   *engine.Runtime
	lin  *lineage.Recorder
	hist *metrics.History
	col  *metrics.Collector
}

// New returns the UI's handler. Mount it at / or under a prefix with
// http.StripPrefix: the page uses relative URLs only.
func New(o Options) (*UI, error) {
	if o.Runtime == nil && o.Cluster == nil {
		return nil, errors.New("ui: Options.Runtime is nil")
	}
	if o.Name == "" && o.Cluster == nil {
		o.Name = "topology"
	}
	if o.History == nil {
		o.History = metrics.NewHistory(metrics.HistoryConfig{})
	}
	if o.StatsTimeout <= 0 {
		o.StatsTimeout = time.Second
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	u := &UI{o: o, mux: http.NewServeMux(), swapped: make(chan struct{})}
	if o.Runtime != nil {
		u.cur = u.newGeneration(o.Runtime, o.History)
	}
	var r prometheus.Registerer = reg
	if len(o.ConstLabels) > 0 {
		r = prometheus.WrapRegistererWith(o.ConstLabels, reg)
	}
	if err := r.Register(current{u}); err != nil {
		return nil, fmt.Errorf("ui: registering the topology's metrics: %w", err)
	}
	u.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	static, _ := fs.Sub(assets, "assets")
	u.mux.Handle("GET /{$}", http.FileServerFS(static))
	u.mux.Handle("GET /app.js", http.FileServerFS(static))
	u.mux.Handle("GET /style.css", http.FileServerFS(static))
	u.mux.Handle("GET /metrics", u.metrics)
	u.mux.HandleFunc("GET /api/topology", u.topology)
	u.mux.HandleFunc("GET /api/stats", u.stats)
	u.mux.HandleFunc("GET /api/history", u.history)
	u.mux.HandleFunc("GET /api/trees", u.trees)
	u.mux.HandleFunc("GET /api/trees/{id...}", u.tree)
	u.mux.HandleFunc("GET /api/ingest", u.ingest)
	u.mux.HandleFunc("GET /api/events/{id...}", u.event)
	u.mux.HandleFunc("GET /api/cluster", u.cluster)
	u.mux.HandleFunc("POST /api/cluster/{action}", u.act)
	return u, nil
}

func (u *UI) newGeneration(rt *engine.Runtime, hist *metrics.History) *generation {
	g := &generation{rt: rt, lin: rt.Lineage(), hist: hist}
	g.col = metrics.NewCollector(u.o.Name, rt, rt.Started(), hist, g.lin)
	return g
}

// SetRuntime makes the UI read rt from now on (a new generation of the topology on
// a worker), with a new History (its counters start from zero); nil: no runtime
// runs here now. Run follows it.
func (u *UI) SetRuntime(rt *engine.Runtime) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cur != nil && u.cur.rt == rt {
		return
	}
	u.cur = nil
	if rt != nil {
		u.cur = u.newGeneration(rt, metrics.NewHistory(u.o.History.Config()))
	}
	close(u.swapped)
	u.swapped = make(chan struct{})
}

// generation returns what the UI reads now (nil: no runtime), and a channel
// closed when that changes.
func (u *UI) generation() (*generation, <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.cur, u.swapped
}

func (u *UI) current() *generation {
	g, _ := u.generation()
	return g
}

// History returns the history the UI reads now (to run it when not using Start or
// Run); nil when no runtime runs.
func (u *UI) History() *metrics.History {
	if g := u.current(); g != nil {
		return g.hist
	}
	return nil
}

// current is the Prometheus collector of whichever runtime the UI reads: none
// when none runs.
type current struct{ u *UI }

// Describe sends nothing: the collector is unchecked (metrics.Collector).
func (current) Describe(chan<- *prometheus.Desc) {}

func (c current) Collect(ch chan<- prometheus.Metric) {
	if g := c.u.current(); g != nil {
		g.col.Collect(ch)
	}
}

// clusterStats returns the stats of every process of rt's topology, waiting at
// most StatsTimeout for the others; an error says which did not answer (the
// stats then lack them).
func (u *UI) clusterStats(ctx context.Context, rt *engine.Runtime) (engine.Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, u.o.StatsTimeout)
	defer cancel()
	return rt.ClusterStats(ctx)
}

// Run keeps the History of the runtime the UI reads, following SetRuntime, until
// ctx ends. Each sample is the stats of every process of the topology
// (Runtime.ClusterStats); one that lacks a process is left out, since a rate or a
// window from it would be wrong. When a runtime ends, a last sample is taken.
func (u *UI) Run(ctx context.Context) {
	for {
		g, swapped := u.generation()
		if g != nil {
			gctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-swapped:
					cancel()
				case <-gctx.Done():
				}
			}()
			u.observe(gctx, g)
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-swapped:
		}
	}
}

// observe samples g's stats every interval of its History until ctx ends or its
// runtime does.
func (u *UI) observe(ctx context.Context, g *generation) {
	t := time.NewTicker(g.hist.Config().Interval)
	defer t.Stop()
	sample := func() {
		if s, err := u.clusterStats(ctx, g.rt); err == nil {
			g.hist.Observe(time.Now(), s)
		}
	}
	sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-g.rt.Done():
			sample()
			return
		case <-t.C:
			sample()
		}
	}
}

// authorized reports whether r carries the token, as a bearer token (the scheme is
// case-insensitive, RFC 7235) or as ?token=.
func (u *UI) authorized(r *http.Request) bool {
	want := []byte(u.o.Token)
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(h[7:])), want) == 1 {
			return true
		}
	}
	return subtle.ConstantTimeCompare([]byte(r.URL.Query().Get("token")), want) == 1
}

// ServeHTTP implements http.Handler: the token check, then the routes.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The page's own files hold no data: they load without the token, so that a
	// browser without it sees the page say what is missing.
	asset := r.URL.Path == "/" || r.URL.Path == "/app.js" || r.URL.Path == "/style.css"
	if u.o.Token != "" && !asset && !u.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gale"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "token required: send Authorization: Bearer TOKEN or ?token=TOKEN"})
		return
	}
	if r.Method == http.MethodPost && u.o.Cluster != nil && strings.HasPrefix(r.URL.Path, "/api/cluster/") {
		if u.o.Token == "" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": actionsNeedToken})
			return
		}
		u.mux.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "the UI is read-only: only GET (a worker's UI started with --ui-token also takes POST /api/cluster/{kill|deactivate|activate|rebalance})"})
		return
	}
	u.mux.ServeHTTP(w, r)
}

// Authorized reports whether r may read the UI: it carries the token, or the UI
// has none.
func (u *UI) Authorized(r *http.Request) bool { return u.o.Token == "" || u.authorized(r) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// TopologyView is the DAG: components, streams and groupings, and a layered layout.
type TopologyView struct {
	Name string `json:"name"`
	// UptimeSeconds runs from the start to now, or to the end once Finished.
	UptimeSeconds float64 `json:"uptime_seconds"`
	StartedAt     int64   `json:"started_at"` // Unix milliseconds
	Finished      bool    `json:"finished"`
	FinishedAt    int64   `json:"finished_at,omitempty"` // Unix milliseconds
	// Ingest says whether the process has an ingest path (/api/ingest, /api/events).
	Ingest bool `json:"ingest"`
	// Cluster says whether the topology runs on a cluster (/api/cluster): a
	// worker's UI, which follows the topology's generations.
	Cluster bool `json:"cluster,omitempty"`
	// Idle: the process runs no generation of the topology now (a worker between
	// generations, or not assigned it, or the topology deactivated or killed); Note
	// says so, and only the name, Ingest and Cluster are set.
	Idle       bool                `json:"idle,omitempty"`
	Note       string              `json:"note,omitempty"`
	Components []ComponentView     `json:"components"`
	Edges      []EdgeView          `json:"edges"`
	Ackers     AckersView          `json:"ackers"`
	Layout     map[string]Position `json:"layout"`
	Config     ConfigView          `json:"config"`
}

// AckersView lists the acker tasks.
type AckersView struct {
	Tasks []int `json:"tasks"`
}

// ComponentView is one spout or bolt.
type ComponentView struct {
	ID          string       `json:"id"`
	Kind        string       `json:"kind"` // spout | bolt
	Parallelism int          `json:"parallelism"`
	Tasks       []int        `json:"tasks"`
	Streams     []StreamView `json:"streams"`
}

// StreamView is a declared output stream.
type StreamView struct {
	ID     string   `json:"id"`
	Fields []string `json:"fields"`
	Direct bool     `json:"direct,omitempty"`
}

// EdgeView is a subscription: from's stream feeds to with a grouping.
type EdgeView struct {
	From     string   `json:"from"`
	To       string   `json:"to"`
	Stream   string   `json:"stream"`
	Grouping string   `json:"grouping"`
	Fields   []string `json:"fields"`
}

// Position places a component: layer is the longest path from a spout, row its index
// within the layer.
type Position struct {
	Layer int `json:"layer"`
	Row   int `json:"row"`
}

// ConfigView is the reliability configuration.
type ConfigView struct {
	Ackers            int     `json:"ackers"`
	MessageTimeoutSec float64 `json:"message_timeout_s"`
	MaxSpoutPending   int     `json:"max_spout_pending"`
	LineageSample     float64 `json:"lineage_sample"`
}

func (u *UI) topology(w http.ResponseWriter, r *http.Request) {
	v := TopologyView{Name: u.o.Name, Ingest: u.o.Ingest != nil, Cluster: u.o.Cluster != nil, Layout: map[string]Position{},
		Components: []ComponentView{}, Edges: []EdgeView{}, Ackers: AckersView{Tasks: []int{}}}
	g := u.current()
	if g == nil {
		v.Idle = true
		v.Note = idleNote(u.o.Name)
		writeJSON(w, http.StatusOK, v)
		return
	}
	rt := g.rt
	topo := rt.Topology()
	v.UptimeSeconds, v.StartedAt = time.Since(rt.Started()).Seconds(), rt.Started().UnixMilli()
	if end := rt.Finished(); !end.IsZero() {
		v.Finished, v.FinishedAt, v.UptimeSeconds = true, end.UnixMilli(), end.Sub(rt.Started()).Seconds()
	}
	v.Ackers.Tasks = rt.AckerTasks()
	cfg := rt.Config()
	v.Config = ConfigView{Ackers: cfg.Ackers, MessageTimeoutSec: cfg.MessageTimeout.Seconds(), MaxSpoutPending: cfg.MaxSpoutPending}
	if g.lin != nil {
		v.Config.LineageSample = g.lin.Config().Sample
	}
	layer := map[string]int{}
	for range topo.Components { // longest path; a cycle cannot push past len(components)
		for _, c := range topo.Components {
			l := 0
			for _, in := range c.Inputs {
				if in.Component != c.ID {
					l = max(l, layer[in.Component]+1)
				}
			}
			layer[c.ID] = min(l, len(topo.Components))
		}
	}
	rows := map[int]int{}
	for _, c := range topo.Components {
		kind := "bolt"
		if c.IsSpout() {
			kind = "spout"
		}
		cv := ComponentView{ID: c.ID, Kind: kind, Parallelism: c.Parallelism, Tasks: rt.Tasks(c.ID), Streams: []StreamView{}}
		ids := make([]string, 0, len(c.Streams))
		for id := range c.Streams {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			st := c.Streams[id]
			cv.Streams = append(cv.Streams, StreamView{ID: id, Fields: st.Source.Fields.Names(), Direct: st.Direct})
		}
		v.Components = append(v.Components, cv)
		for _, in := range c.Inputs {
			e := EdgeView{From: in.Component, To: c.ID, Stream: in.Stream, Grouping: in.Grouping.Kind.String(), Fields: in.Grouping.Fields}
			if e.Fields == nil {
				e.Fields = []string{}
			}
			v.Edges = append(v.Edges, e)
		}
		l := layer[c.ID]
		v.Layout[c.ID] = Position{Layer: l, Row: rows[l]}
		rows[l]++
	}
	writeJSON(w, http.StatusOK, v)
}

func (u *UI) stats(w http.ResponseWriter, r *http.Request) {
	window := r.URL.Query().Get("window")
	if window == "" {
		window = "10m"
	}
	if window != "10m" && window != "all" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("window %q: must be 10m or all", window)})
		return
	}
	g := u.current()
	if g == nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": idleNote(u.o.Name)})
		return
	}
	rt := g.rt
	s, err := u.clusterStats(r.Context(), rt)
	now := time.Now()
	if err == nil {
		writeJSON(w, http.StatusOK, StatsView{Table: g.hist.Table(window, now, rt.Started(), s)})
		return
	}
	// Some process did not answer: this one's own tasks, since its start (a window's
	// base holds every process's counts, so it cannot be subtracted from these).
	v := StatsView{Table: g.hist.Table("all", now, rt.Started(), rt.Stats()), Partial: true,
		Note: fmt.Sprintf("not every process of the topology sent its stats (%v): the counts below are this process's tasks only, since it started", err)}
	v.Window = window
	writeJSON(w, http.StatusOK, v)
}

// StatsView is /api/stats: Storm's table of every process of the topology. If some
// process did not answer in time, Partial is set and the table holds this
// process's tasks only, counted since it started; Note says why.
type StatsView struct {
	metrics.Table
	Partial bool   `json:"partial,omitempty"`
	Note    string `json:"note,omitempty"`
}

// idleNote says that the process runs no generation of topology name now.
func idleNote(name string) string {
	if name == "" {
		return "this worker runs no topology now"
	}
	return fmt.Sprintf("this worker runs no generation of %s now (not assigned here, between generations, deactivated or killed)", name)
}

// HistoryView is the chart data.
type HistoryView struct {
	IntervalSeconds float64         `json:"interval_seconds"`
	Points          []metrics.Point `json:"points"`
}

func (u *UI) history(w http.ResponseWriter, r *http.Request) {
	v := HistoryView{IntervalSeconds: u.o.History.Config().Interval.Seconds(), Points: []metrics.Point{}}
	if g := u.current(); g != nil {
		if pts := g.hist.Points(); pts != nil {
			v.Points = pts
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// lineage returns the generation read now if it records lineage, and why not ("" if
// it does).
func (u *UI) lineage() (*generation, string) {
	g := u.current()
	switch {
	case g == nil:
		return nil, idleNote(u.o.Name)
	case g.lin == nil:
		return nil, "lineage is off"
	}
	return g, ""
}

// TreeView is one tuple tree for the message page (times in Unix milliseconds).
type TreeView struct {
	Root      string        `json:"root"`
	MsgID     string        `json:"msg_id"`
	Spout     string        `json:"spout"`
	SpoutTask int           `json:"spout_task"`
	Outcome   string        `json:"outcome"`
	Reason    string        `json:"reason"`
	StartedAt int64         `json:"started_at"`
	EndedAt   int64         `json:"ended_at"`
	Sampled   bool          `json:"sampled"`
	Nodes     []NodeView    `json:"nodes,omitempty"`
	Pending   []PendingView `json:"pending,omitempty"`
	Fails     []FailView    `json:"fails,omitempty"`
	Truncated int           `json:"truncated,omitempty"`
	Attempts  []string      `json:"attempts,omitempty"` // roots of the same message id, oldest first
	Note      string        `json:"note,omitempty"`
}

// NodeView is one tuple of a sampled tree.
type NodeView struct {
	ID          string   `json:"id"`
	Component   string   `json:"component"`
	Task        int      `json:"task"`
	Stream      string   `json:"stream"`
	Parents     []string `json:"parents"`
	ToComponent string   `json:"to_component"`
	ToTask      int      `json:"to_task"`
	EmittedAt   int64    `json:"emitted_at"`
	State       string   `json:"state"`
	DoneByTask  int      `json:"done_by_task"`
	DoneAt      int64    `json:"done_at"`
	Reason      string   `json:"reason"`
	AgeMs       float64  `json:"age_ms,omitempty"`
}

// PendingView is a tuple a task still held when its tree ended (or holds now).
type PendingView struct {
	Node      string  `json:"node,omitempty"`
	Component string  `json:"component"`
	Task      int     `json:"task"`
	From      string  `json:"from"`
	FromTask  int     `json:"from_task"`
	Stream    string  `json:"stream"`
	Since     int64   `json:"since"`
	AgeMs     float64 `json:"age_ms"`
	Source    string  `json:"source"` // "task" (the holder reported it) or "lineage"
}

// FailView is an explicit fail.
type FailView struct {
	Component string `json:"component"`
	Task      int    `json:"task"`
	From      string `json:"from"`
	FromTask  int    `json:"from_task"`
	Stream    string `json:"stream"`
	At        int64  `json:"at"`
	Reason    string `json:"reason"`
}

func hexID(id uint64) string { return fmt.Sprintf("%016x", id) }
func msOf(ns int64) int64    { return ns / 1e6 }

func summary(t lineage.Tree) TreeView {
	return TreeView{
		Root: hexID(t.Root), MsgID: t.MsgID, Spout: t.Spout, SpoutTask: t.SpoutTask,
		Outcome: string(t.Outcome), Reason: t.Reason, StartedAt: msOf(t.StartedAt),
		EndedAt: msOf(t.EndedAt), Sampled: t.Sampled,
	}
}

func (u *UI) trees(w http.ResponseWriter, r *http.Request) {
	g, why := u.lineage()
	if g == nil {
		writeJSON(w, http.StatusOK, map[string]any{"trees": []TreeView{}, "note": why})
		return
	}
	kind := r.URL.Query().Get("kind")
	var o lineage.Outcome
	switch kind {
	case "failed":
		o = lineage.Failed
	case "timed_out":
		o = lineage.TimedOut
	case "sampled", "":
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("kind %q: must be failed, timed_out or sampled", kind)})
		return
	}
	limit := 50
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("limit %q: must be 1 to 1000", s)})
			return
		}
		limit = n
	}
	// Trees are kept by the processes that run spouts: ask them (this one alone
	// answers at once).
	ctx, cancel := context.WithTimeout(r.Context(), u.o.StatsTimeout)
	defer cancel()
	trees, err := g.rt.ClusterTrees(ctx, o, limit)
	out := []TreeView{}
	for _, t := range trees {
		out = append(out, summary(t))
	}
	v := map[string]any{"trees": out}
	if err != nil {
		v["note"] = "incomplete: " + err.Error()
	}
	writeJSON(w, http.StatusOK, v)
}

func (u *UI) tree(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	g, why := u.lineage()
	if g == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": why + " in this process"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), u.o.StatsTimeout)
	defer cancel()
	t, attempts, ok, err := g.rt.ClusterTree(ctx, id)
	if !ok {
		msg := fmt.Sprintf("no tree for %q: not a root id or message id of a sampled (%g%%), failed or timed-out tree still kept",
			id, 100*g.lin.Config().Sample)
		if err != nil {
			msg += " (" + err.Error() + ")"
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": msg})
		return
	}
	now := time.Now().UnixNano()
	v := summary(t)
	v.Truncated = t.Truncated
	for _, n := range t.Nodes {
		nv := NodeView{ID: hexID(n.ID), Component: n.Component, Task: n.Task, Stream: n.Stream, Parents: []string{},
			ToComponent: n.ToComponent, ToTask: n.ToTask, EmittedAt: msOf(n.EmittedAt), State: n.State,
			DoneByTask: n.DoneByTask, DoneAt: msOf(n.DoneAt), Reason: n.Reason}
		for _, p := range n.Parents {
			nv.Parents = append(nv.Parents, hexID(p))
		}
		if n.State == lineage.NodePending {
			end := now
			if t.EndedAt != 0 {
				end = t.EndedAt
			}
			nv.AgeMs = float64(end-n.EmittedAt) / 1e6
		}
		v.Nodes = append(v.Nodes, nv)
	}
	for _, h := range t.Holders {
		p := PendingView{Component: h.Component, Task: h.Task, From: h.SourceComp, FromTask: h.SourceTask,
			Stream: h.Stream, Since: msOf(h.Since), AgeMs: float64(h.FoundAt-h.Since) / 1e6, Source: "task"}
		if h.Node != 0 {
			p.Node = hexID(h.Node)
		}
		if h.FromLineage {
			p.Source = "lineage"
		}
		v.Pending = append(v.Pending, p)
	}
	for _, f := range t.Fails {
		v.Fails = append(v.Fails, FailView{Component: f.Component, Task: f.Task, From: f.SourceComp,
			FromTask: f.SourceTask, Stream: f.Stream, At: msOf(f.At), Reason: f.Reason})
	}
	for _, root := range attempts {
		v.Attempts = append(v.Attempts, hexID(root))
	}
	switch {
	case !t.Sampled && t.Outcome == lineage.TimedOut:
		v.Note = "not sampled: the tuples below are those the tasks still held when the tree timed out"
	case !t.Sampled:
		v.Note = "not sampled: only the fail point is recorded"
	}
	writeJSON(w, http.StatusOK, v)
}

// Server serves a UI on a TCP address and runs its History, until Close.
type Server struct {
	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start listens on addr (":8080", "127.0.0.1:0") and serves u there; it also runs u's
// History. The error names the address when it cannot listen.
func Start(u *UI, addr string) (*Server, error) {
	ln, err := Listen(addr)
	if err != nil {
		return nil, err
	}
	return Serve(u, ln), nil
}

// Listen opens the UI's TCP listener, naming the address when it cannot: a command
// listens before its job starts, so a taken port fails at once.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ui: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Serve serves u on ln and runs its History (Run), until Close (which also closes
// ln).
func Serve(u *UI, ln net.Listener) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{srv: &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}, ln: ln, cancel: cancel}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); _ = s.srv.Serve(ln) }()
	go func() { defer s.wg.Done(); u.Run(ctx) }()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the UI's base URL; an unspecified listen host (":8080") shows as 127.0.0.1.
func (s *Server) URL() string {
	addr := s.ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(addr.Port)) + "/"
}

// Close stops serving (in-flight requests get up to 2 s) and stops the History.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.cancel()
	s.wg.Wait()
	return err
}
