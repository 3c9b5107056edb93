package multilang

import (
	"slices"
	"strings"
	"time"

	"github.com/gale-stream/gale/topology"
)

// DefaultTimeout is Storm's topology.subprocess.timeout.secs default: a subprocess
// that has not answered for this long is killed and restarted.
const DefaultTimeout = 30 * time.Second

// Option configures a shell component.
type Option func(*options)

type options struct {
	command   []string
	dir       string
	env       []string
	conf      map[string]any
	outputs   map[string][]string
	timeout   time.Duration
	heartbeat time.Duration
	grace     time.Duration
	onStart   func(tc topology.TaskContext, pid int)
}

func newOptions(command []string, dir string, opts []Option) *options {
	o := &options{
		command: append([]string(nil), command...), dir: dir,
		timeout: DefaultTimeout, grace: 5 * time.Second,
	}
	for _, opt := range opts {
		opt(o)
	}
	if o.heartbeat <= 0 {
		o.heartbeat = min(time.Second, o.timeout/3)
	}
	return o
}

// Timeout sets how long a subprocess may stay silent (Storm's
// topology.subprocess.timeout.secs, default 30 s): a bolt's subprocess that answers
// no heartbeat and sends nothing for this long, or a spout's that does not sync, is
// killed and restarted. It also bounds the handshake.
func Timeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// Heartbeat sets how often a bolt's subprocess is sent a heartbeat tuple (default the
// smaller of 1 s and a third of the timeout).
func Heartbeat(d time.Duration) Option { return func(o *options) { o.heartbeat = d } }

// StopGrace bounds each step of a subprocess's stop: after stdin is closed it has
// this long to exit, then SIGTERM, then this long again, then SIGKILL. Default 5 s.
func StopGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// Env adds "KEY=value" entries to the subprocess's environment (gale's own is kept).
func Env(kv ...string) Option { return func(o *options) { o.env = append(o.env, kv...) } }

// Conf sets the "conf" map of the handshake (Storm sends the topology's config).
// topology.subprocess.timeout.secs is always added.
func Conf(conf map[string]any) Option { return func(o *options) { o.conf = conf } }

// Outputs tells the subprocess a stream's output fields, in the handshake's
// "stream->outputfields" (informational: gale checks emits against what the
// component declared in the topology).
func Outputs(stream string, fields ...string) Option {
	return func(o *options) {
		if o.outputs == nil {
			o.outputs = map[string][]string{}
		}
		o.outputs[stream] = fields
	}
}

// OnStart is called with the pid of each run of the subprocess, after its
// handshake (a restart calls it again).
func OnStart(fn func(tc topology.TaskContext, pid int)) Option {
	return func(o *options) { o.onStart = fn }
}

// setup is the handshake message for one task: the conf, and Storm's context
// of the task (every task's component, this component's streams and fields, whom
// each of its streams goes to and how, and what it reads and how).
func (o *options) setup(tc topology.TaskContext) map[string]any {
	conf := map[string]any{}
	for k, v := range o.conf {
		conf[k] = v
	}
	conf["topology.subprocess.timeout.secs"] = int(o.timeout.Seconds())
	t2c := map[string]string{}
	outputs := map[string][]string{}
	targets := map[string]map[string]any{}
	sources := map[string]map[string]any{}
	sourceFields := map[string]map[string][]string{}
	if topo := tc.Topology; topo != nil {
		for _, c := range topo.Components {
			if tc.ComponentTasks != nil {
				for _, t := range tc.ComponentTasks(c.ID) {
					t2c[itoa(t)] = c.ID
				}
			}
		}
		if me := topo.Component(tc.Component); me != nil {
			for id, st := range me.Streams {
				outputs[id] = st.Source.Fields.Names()
				targets[id] = map[string]any{}
				for _, cons := range topo.Consumers(me.ID, id) {
					targets[id][cons.Bolt.ID] = groupingJSON(cons.Input.Grouping)
				}
			}
			for _, in := range me.Inputs {
				if sources[in.Component] == nil {
					sources[in.Component] = map[string]any{}
					sourceFields[in.Component] = map[string][]string{}
				}
				sources[in.Component][in.Stream] = groupingJSON(in.Grouping)
				if src := topo.Component(in.Component); src != nil && src.Streams[in.Stream] != nil {
					sourceFields[in.Component][in.Stream] = src.Streams[in.Stream].Source.Fields.Names()
				}
			}
		}
	} else if tc.ComponentTasks != nil {
		for _, t := range tc.ComponentTasks(tc.Component) {
			t2c[itoa(t)] = tc.Component
		}
	}
	t2c[itoa(tc.TaskID)] = tc.Component
	for s, f := range o.outputs { // what the caller declared wins
		outputs[s] = f
	}
	streams := []string{}
	for s := range outputs {
		streams = append(streams, s)
	}
	slices.Sort(streams)
	return map[string]any{
		"conf": conf,
		"context": map[string]any{
			"task->component":          t2c,
			"taskid":                   tc.TaskID,
			"componentid":              tc.Component,
			"streams":                  streams,
			"stream->outputfields":     outputs,
			"stream->target->grouping": targets,
			"source->stream->grouping": sources,
			"source->stream->fields":   sourceFields,
		},
	}
}

// groupingJSON is a grouping as the handshake's context gives it: its type, and
// a fields grouping's fields.
func groupingJSON(g topology.Grouping) map[string]any {
	m := map[string]any{"type": strings.ReplaceAll(strings.ToUpper(g.Kind.String()), "-", "_")} // Storm's names
	if g.Kind == topology.FieldsKind {
		m["fields"] = g.Fields
	}
	return m
}
