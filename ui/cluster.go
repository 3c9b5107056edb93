package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Cluster is the cluster a topology runs on, for the page's cluster section and
// its actions: gale worker implements it on the cluster's state in JetStream KV;
// the package knows nothing of it.
type Cluster interface {
	// Status returns the cluster as seen from the UI's topology now.
	Status(ctx context.Context) (ClusterView, error)
	// Act asks the cluster's scheduler for one of Storm's actions on the topology
	// ("kill", "deactivate", "activate" or "rebalance" over workers workers, 0: as
	// many as now) and returns its answer once it has placed it. An error wrapping
	// ErrActionRefused is the scheduler's refusal.
	Act(ctx context.Context, action string, workers int) (ActionResult, error)
}

// ErrActionRefused is wrapped by Cluster.Act's error when the scheduler (or the
// state of the topology) refuses the action: the UI answers 409 Conflict.
var ErrActionRefused = errors.New("action refused")

// Actions are the actions POST /api/cluster/{action} takes.
var Actions = []string{"kill", "deactivate", "activate", "rebalance"}

// actionsNeedToken is the 403 of an action on a UI without a token.
const actionsNeedToken = "actions (kill, deactivate, activate, rebalance) need a token: start the worker with --ui-token TOKEN and send it (Authorization: Bearer TOKEN or ?token=TOKEN)"

// ClusterView is /api/cluster: the workers, the scheduler, and the topology's
// generation and placement.
type ClusterView struct {
	// Topology is the UI's topology ("" for a worker's UI that has none yet);
	// Topologies those the server can show (?topology=NAME).
	Topology   string   `json:"topology"`
	Topologies []string `json:"topologies,omitempty"`
	// Self is the worker serving this UI.
	Self string `json:"self"`
	// State is the topology's: active, inactive, killed, or "not submitted".
	State string `json:"state"`
	// Generation is the topology's newest generation (the scheduler's record), 0
	// when not placed; Want the workers asked for; Short how many it lacks for
	// want of free slots.
	Generation uint64 `json:"generation"`
	Want       int    `json:"want"`
	Short      int    `json:"short,omitempty"`
	// Error is why the scheduler refused the last request or pass.
	Error string `json:"error,omitempty"`
	// Scheduler is the worker that holds the scheduler's lease (nil: none).
	Scheduler *SchedulerView `json:"scheduler"`
	// Workers are the live workers, and those of the topology's generation that
	// are not live (Live false), by name.
	Workers []WorkerView `json:"workers"`
	// Components lists each component of the topology (ackers as "__acker") with
	// the worker of each of its tasks.
	Components []ClusterComponent `json:"components"`
	// Actions says whether POST /api/cluster/{action} is open (the UI has a
	// token); ActionsNote says how to open it when not.
	Actions     bool   `json:"actions"`
	ActionsNote string `json:"actions_note,omitempty"`
	// At is when the state was read (Unix milliseconds).
	At int64 `json:"at"`
}

// SchedulerView is the scheduler's lease.
type SchedulerView struct {
	Holder string `json:"holder"`
	Since  int64  `json:"since"` // Unix milliseconds
}

// WorkerView is one worker: its heartbeat, and its part of the UI's topology.
type WorkerView struct {
	Name string `json:"name"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Live: its heartbeat has not expired. A worker of the topology's generation
	// that is not live is lost (its tasks move).
	Live          bool    `json:"live"`
	StartedAt     int64   `json:"started_at"` // Unix milliseconds
	UptimeSeconds float64 `json:"uptime_seconds"`
	// HeartbeatAgeSeconds is the time since the server stored its last heartbeat.
	HeartbeatAgeSeconds float64 `json:"heartbeat_age_seconds"`
	Slots               int     `json:"slots"`
	Dedicated           bool    `json:"dedicated,omitempty"`
	// Tasks are the topology's tasks the newest generation assigns it.
	Tasks []int `json:"tasks"`
	// Generation is the generation of the topology it runs (0: none); Running
	// every topology it runs, with its generation.
	Generation uint64            `json:"generation"`
	Running    map[string]uint64 `json:"running"`
	// Refused is why it refuses the topology ("" if it does not).
	Refused string `json:"refused,omitempty"`
	// Self: it serves this UI; Scheduler: it holds the lease.
	Self      bool `json:"self,omitempty"`
	Scheduler bool `json:"scheduler,omitempty"`
}

// ClusterComponent is a component's tasks and their workers, by task id.
type ClusterComponent struct {
	ID    string      `json:"id"`
	Tasks []TaskPlace `json:"tasks"`
}

// TaskPlace is where a task runs.
type TaskPlace struct {
	Task   int    `json:"task"`
	Worker string `json:"worker"`
}

// ActionResult is the answer to POST /api/cluster/{action}.
type ActionResult struct {
	Action     string   `json:"action"`
	Topology   string   `json:"topology"`
	Generation uint64   `json:"generation"`
	State      string   `json:"state"`
	Workers    []string `json:"workers,omitempty"` // of the generation, after a rebalance
}

// actionTimeout bounds an action: the scheduler answers within a pass.
const actionTimeout = 30 * time.Second

func (u *UI) cluster(w http.ResponseWriter, r *http.Request) {
	if u.o.Cluster == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no cluster: this process runs the topology by itself (gale worker --ui serves the cluster's view)"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v, err := u.o.Cluster.Status(ctx)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": fmt.Sprintf("reading the cluster's state: %v", err)})
		return
	}
	if v.Workers == nil {
		v.Workers = []WorkerView{}
	}
	if v.Components == nil {
		v.Components = []ClusterComponent{}
	}
	for i := range v.Workers {
		if v.Workers[i].Tasks == nil {
			v.Workers[i].Tasks = []int{}
		}
		if v.Workers[i].Running == nil {
			v.Workers[i].Running = map[string]uint64{}
		}
	}
	v.Actions = u.o.Token != ""
	if !v.Actions {
		v.ActionsNote = actionsNeedToken
	}
	writeJSON(w, http.StatusOK, v)
}

func (u *UI) act(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if !slices.Contains(Actions, action) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("no action %q: kill, deactivate, activate or rebalance", action)})
		return
	}
	workers := 0
	if s := r.URL.Query().Get("workers"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 10000 {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("workers %q: a number of workers, 0 for as many as now", s)})
			return
		}
		if action != "rebalance" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "workers is for rebalance only"})
			return
		}
		workers = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	res, err := u.o.Cluster.Act(ctx, action, workers)
	switch {
	case errors.Is(err, ErrActionRefused):
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
	case err != nil && ctx.Err() != nil:
		writeJSON(w, http.StatusGatewayTimeout, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusOK, res)
	}
}
