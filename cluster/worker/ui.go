package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gale-stream/gale/cluster"
	"github.com/gale-stream/gale/cluster/placement"
	"github.com/gale-stream/gale/engine"
	"github.com/gale-stream/gale/metrics"
	"github.com/gale-stream/gale/ui"
)

// UI is a worker's web UI (`gale worker --ui`): the UI of each topology the worker
// runs, one ui.UI per topology, each following the topology's generations (the
// worker's OnStart and OnStop swap the runtime it reads, see Hook), with the
// cluster's section (the workers, the scheduler, each task's worker: ui.Cluster)
// and, with a token, Storm's actions (kill, deactivate, activate, rebalance).
//
// GET ?topology=NAME picks a topology (the page passes it on to its API calls);
// without it, the first by name of those the worker runs now, else of those it
// ran, else a page with the cluster's section only; a topology of the cluster the
// worker has not run gets its cluster section if the request has the token. Every
// metric of /metrics carries worker=NAME, and counts this process's tasks only:
// Prometheus scrapes every worker and sums. The page's stats are every process's
// (Runtime.ClusterStats).
//
// Make one with ListenUI, Hook the worker's Config, Serve once the worker is made,
// and Close it after the worker has stopped. A nil *UI (no UI) does nothing.
type UI struct {
	token  string
	ln     net.Listener
	reg    *prometheus.Registry
	labels prometheus.Labels
	srv    *http.Server
	ctx    context.Context // the UIs' Run
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	self   string
	store  *cluster.Store
	uis    map[string]*topologyUI
	none   *ui.UI // the page when there is no topology to show
}

// topologyUI is the UI of one topology, and the runtime it reads (nil: none here
// now).
type topologyUI struct {
	ui *ui.UI
	rt *engine.Runtime
}

// ListenUI opens the UI's listener on addr (host:port), so that a taken port fails
// before the worker joins. With a token, every request must carry it
// ("Authorization: Bearer TOKEN", or ?token= from a browser), and it allows the
// actions.
func ListenUI(addr, token string) (*UI, error) {
	ln, err := ui.Listen(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &UI{token: token, ln: ln, ctx: ctx, cancel: cancel, uis: map[string]*topologyUI{}}, nil
}

// Hook makes cfg's worker tell the UI of each engine it starts and stops, after
// the OnStart and OnStop cfg has.
func (wu *UI) Hook(cfg *Config) {
	if wu == nil {
		return
	}
	start, stop := cfg.OnStart, cfg.OnStop
	cfg.OnStart = func(topology string, gen uint64, rt *engine.Runtime) {
		if start != nil {
			start(topology, gen, rt)
		}
		wu.started(topology, gen, rt)
	}
	cfg.OnStop = func(topology string, gen uint64, rt *engine.Runtime) {
		if stop != nil {
			stop(topology, gen, rt)
		}
		wu.stopped(topology, gen, rt)
	}
}

// URL is the UI's base URL, ending in a slash; an unspecified host shows as
// 127.0.0.1 ("" for a nil UI).
func (wu *UI) URL() string {
	if wu == nil {
		return ""
	}
	return uiURL(wu.ln)
}

// Serve starts serving, as worker self (Worker.Name) of the cluster in st.
func (wu *UI) Serve(self string, st *cluster.Store) error {
	if wu == nil {
		return nil
	}
	wu.mu.Lock()
	defer wu.mu.Unlock()
	wu.self, wu.store = self, st
	wu.labels = prometheus.Labels{"worker": self}
	wu.reg = prometheus.NewRegistry()
	if err := metrics.RegisterProcess(prometheus.WrapRegistererWith(wu.labels, wu.reg)); err != nil {
		return err
	}
	none, err := wu.newUI("", nil)
	if err != nil {
		return err
	}
	wu.none = none
	wu.srv = &http.Server{Handler: wu, ReadHeaderTimeout: 10 * time.Second}
	wu.wg.Go(func() { _ = wu.srv.Serve(wu.ln) })
	return nil
}

// uiURL is the base URL of a listener; an unspecified host shows as 127.0.0.1.
func uiURL(ln net.Listener) string {
	a := ln.Addr().(*net.TCPAddr)
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(a.Port)) + "/"
}

// Close stops serving (in-flight requests get up to 2 s) and the UIs' histories.
func (wu *UI) Close() error {
	if wu == nil {
		return nil
	}
	wu.mu.Lock()
	srv := wu.srv
	wu.mu.Unlock()
	var err error
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = srv.Shutdown(ctx) // also closes the listener
		cancel()
	} else {
		err = wu.ln.Close()
	}
	wu.mu.Lock()
	wu.closed = true // no more histories to run
	wu.mu.Unlock()
	wu.cancel()
	wu.wg.Wait()
	return err
}

// newUI makes the UI of topology name reading rt (nil: none yet), and runs its
// history (wu.mu held).
func (wu *UI) newUI(name string, rt *engine.Runtime) (*ui.UI, error) {
	u, err := ui.New(ui.Options{Name: name, Runtime: rt, Token: wu.token, Registry: wu.reg, ConstLabels: wu.labels,
		Cluster: &workerCluster{wu: wu, topology: name}})
	if err != nil {
		return nil, err
	}
	if !wu.closed {
		wu.wg.Go(func() { u.Run(wu.ctx) })
	}
	return u, nil
}

// started is the worker's OnStart: the topology's UI reads rt from now on.
func (wu *UI) started(topology string, _ uint64, rt *engine.Runtime) {
	wu.mu.Lock()
	defer wu.mu.Unlock()
	if t := wu.uis[topology]; t != nil {
		t.rt = rt
		t.ui.SetRuntime(rt)
		return
	}
	u, err := wu.newUI(topology, rt)
	if err != nil {
		return // only a registry conflict, which a fresh name cannot have
	}
	wu.uis[topology] = &topologyUI{ui: u, rt: rt}
}

// stopped is the worker's OnStop: the topology's UI has no runtime until the
// next generation starts here.
func (wu *UI) stopped(topology string, _ uint64, rt *engine.Runtime) {
	wu.mu.Lock()
	defer wu.mu.Unlock()
	if t := wu.uis[topology]; t != nil && t.rt == rt {
		t.rt = nil
		t.ui.SetRuntime(nil)
	}
}

// topologies names the topologies the server has a UI for.
func (wu *UI) topologies() []string {
	wu.mu.Lock()
	defer wu.mu.Unlock()
	return slices.Sorted(maps.Keys(wu.uis))
}

// ServeHTTP serves the UI of the topology asked for (?topology=), else of the
// first the worker runs.
func (wu *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u, err := wu.pick(r)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "{\"error\":%q}\n", err.Error())
		return
	}
	u.ServeHTTP(w, r)
}

func (wu *UI) pick(r *http.Request) (*ui.UI, error) {
	name := r.URL.Query().Get("topology")
	wu.mu.Lock()
	if name == "" {
		defer wu.mu.Unlock()
		var first *topologyUI
		for _, n := range slices.Sorted(maps.Keys(wu.uis)) {
			t := wu.uis[n]
			if t.rt != nil {
				return t.ui, nil
			}
			if first == nil {
				first = t
			}
		}
		if first != nil {
			return first.ui, nil
		}
		return wu.none, nil
	}
	t, none, st := wu.uis[name], wu.none, wu.store
	wu.mu.Unlock()
	if t != nil {
		return t.ui, nil
	}
	// A topology of the cluster this worker has not run since it started: its
	// cluster section and actions, if the cluster has a record of it. Asking the
	// cluster takes the token: without it, the page says what is missing.
	if !none.Authorized(r) {
		return none, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if _, err := st.Record(ctx, name); err != nil {
		return nil, fmt.Errorf("topology %q: %v", name, err)
	}
	wu.mu.Lock()
	defer wu.mu.Unlock()
	if t := wu.uis[name]; t != nil { // made meanwhile
		return t.ui, nil
	}
	u, err := wu.newUI(name, nil)
	if err != nil {
		return nil, err
	}
	wu.uis[name] = &topologyUI{ui: u}
	return u, nil
}

// workerCluster is a topology's cluster, as the UI shows it and acts on it.
type workerCluster struct {
	wu       *UI
	topology string
}

func stateOf(rec *cluster.Record) string {
	switch {
	case rec == nil:
		return "not submitted"
	case rec.Killed:
		return "killed"
	case rec.Inactive:
		return "inactive"
	}
	return "active"
}

// Status reads the workers, the lease and the records, and the topology's spec for
// its tasks' components.
func (c *workerCluster) Status(ctx context.Context) (ui.ClusterView, error) {
	c.wu.mu.Lock()
	st, self := c.wu.store, c.wu.self
	c.wu.mu.Unlock()
	now := time.Now()
	v := ui.ClusterView{Topology: c.topology, Self: self, At: now.UnixMilli()}
	ws, err := st.Workers(ctx)
	if err != nil {
		return v, err
	}
	lease, err := st.Lease(ctx)
	if err != nil && !errors.Is(err, cluster.ErrNoLease) {
		return v, err
	}
	recs, err := st.Records(ctx)
	if err != nil {
		return v, err
	}
	var rec *cluster.Record
	names := map[string]bool{}
	for _, r := range recs {
		if r.Topology == c.topology {
			rec = r
		}
		if !r.Killed {
			names[r.Topology] = true
		}
	}
	for _, n := range c.wu.topologies() {
		names[n] = true
	}
	v.Topologies = slices.Sorted(maps.Keys(names))
	var spec *cluster.Spec
	if c.topology != "" {
		if spec, err = st.Spec(ctx, c.topology); err != nil && !errors.Is(err, cluster.ErrNotSubmitted) {
			return v, err
		}
	}
	v.State = stateOf(rec)
	if rec != nil {
		v.Generation, v.Want, v.Short, v.Error = rec.Generation(), rec.Want, rec.Short, rec.Error
	}
	if lease != nil {
		v.Scheduler = &ui.SchedulerView{Holder: lease.Holder, Since: lease.Since.UnixMilli()}
	}
	var a *placement.Assignment // where the tasks run: none when killed
	if rec != nil && rec.Assignment != nil && !rec.Killed {
		a = rec.Assignment
	}
	live := map[string]bool{}
	for _, wi := range ws {
		live[wi.Name] = true
		wv := ui.WorkerView{Name: wi.Name, Host: wi.Host, PID: wi.PID, Live: true,
			StartedAt: wi.Started.UnixMilli(), UptimeSeconds: now.Sub(wi.Started).Seconds(),
			HeartbeatAgeSeconds: max(now.Sub(wi.Beat).Seconds(), 0), Slots: wi.Slots, Dedicated: wi.Dedicated,
			Tasks: tasksOn(a, wi.Name), Generation: wi.Running[c.topology], Running: wi.Running,
			Self: wi.Name == self, Scheduler: lease != nil && lease.Holder == wi.Name}
		if ref, ok := wi.Refused[c.topology]; ok {
			wv.Refused = ref.Reason
		}
		v.Workers = append(v.Workers, wv)
	}
	if a != nil {
		for _, name := range a.Workers {
			if !live[name] {
				v.Workers = append(v.Workers, ui.WorkerView{Name: name, Tasks: tasksOn(a, name)})
			}
		}
	}
	slices.SortFunc(v.Workers, func(x, y ui.WorkerView) int { return cmp.Compare(x.Name, y.Name) })
	if spec != nil {
		tasks := slices.Clone(spec.Tasks)
		slices.SortFunc(tasks, func(x, y placement.Task) int { return x.ID - y.ID })
		idx := map[string]int{}
		for _, t := range tasks {
			i, ok := idx[t.Component]
			if !ok {
				i = len(v.Components)
				idx[t.Component] = i
				v.Components = append(v.Components, ui.ClusterComponent{ID: t.Component})
			}
			v.Components[i].Tasks = append(v.Components[i].Tasks, ui.TaskPlace{Task: t.ID, Worker: workerOf(a, t.ID)})
		}
	}
	return v, nil
}

// tasksOn lists the tasks a places on worker w (a may be nil).
func tasksOn(a *placement.Assignment, w string) []int {
	if a == nil {
		return nil
	}
	return a.Tasks(w)
}

// workerOf names the worker a places task on ("" for none; a may be nil).
func workerOf(a *placement.Assignment, task int) string {
	if a == nil {
		return ""
	}
	return a.Of[task]
}

// Act asks the scheduler for the action and waits for its answer (the record).
func (c *workerCluster) Act(ctx context.Context, action string, workers int) (ui.ActionResult, error) {
	res := ui.ActionResult{Action: action, Topology: c.topology}
	if c.topology == "" {
		return res, fmt.Errorf("%w: this worker runs no topology: open the UI with ?topology=NAME", ui.ErrActionRefused)
	}
	c.wu.mu.Lock()
	st := c.wu.store
	c.wu.mu.Unlock()
	var rec *cluster.Record
	var err error
	switch action {
	case "kill":
		rec, err = st.Kill(ctx, c.topology)
	case "deactivate":
		rec, err = st.Deactivate(ctx, c.topology)
	case "activate":
		rec, err = st.Activate(ctx, c.topology)
	case "rebalance":
		rec, err = st.Rebalance(ctx, c.topology, workers)
	default:
		return res, fmt.Errorf("%w: no action %q", ui.ErrActionRefused, action)
	}
	if errors.Is(err, cluster.ErrRefused) || errors.Is(err, cluster.ErrNotSubmitted) || errors.Is(err, cluster.ErrConfig) {
		return res, fmt.Errorf("%w: %w", ui.ErrActionRefused, err)
	}
	if err != nil {
		return res, err
	}
	res.Generation, res.State = rec.Generation(), stateOf(rec)
	if rec.Assignment != nil {
		res.Workers = rec.Assignment.Workers
	}
	return res, nil
}
