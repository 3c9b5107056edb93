package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gale-stream/gale/tuple"
)

// MaxParallelism bounds the tasks of one component (task ids must fit the acker's
// packed entries with room to spare).
const MaxParallelism = 1 << 20

// ErrTopology wraps every error found when building a topology.
var ErrTopology = errors.New("gale: invalid topology")

// Stream is a declared output stream of a component.
type Stream struct {
	Source *tuple.Source // component, stream id and fields, shared by its tuples
	Direct bool          // only EmitDirect may emit on it, only Direct may consume it
}

// Input is one subscription of a bolt to a stream.
type Input struct {
	Component string
	Stream    string
	Grouping  Grouping
}

// Component is a spout or bolt of a built topology. Exactly one of Spout, Bolt and
// Basic is set. A built Topology is read-only.
type Component struct {
	ID          string
	Parallelism int
	Spout       func() Spout
	Bolt        func() Bolt
	Basic       func() BasicBolt
	Streams     map[string]*Stream // declared outputs by stream id
	Inputs      []Input
	// TickEvery, if > 0, delivers a tick tuple to every task of the bolt at this
	// interval (Storm's topology.tick.tuple.freq.secs), for time-based flushes.
	TickEvery time.Duration
}

// IsSpout reports whether the component is a spout.
func (c *Component) IsSpout() bool { return c.Spout != nil }

// Topology is a validated graph of spouts and bolts, made by Builder.Build.
type Topology struct {
	// Components in declaration order.
	Components []*Component
	byID       map[string]*Component
}

// Component returns the component with the given id, or nil.
func (t *Topology) Component(id string) *Component { return t.byID[id] }

// Consumers returns, for a component's stream, every (bolt, input) subscribed to it,
// in declaration order.
func (t *Topology) Consumers(component, stream string) []Consumer {
	var out []Consumer
	for _, c := range t.Components {
		for _, in := range c.Inputs {
			if in.Component == component && in.Stream == stream {
				out = append(out, Consumer{Bolt: c, Input: in})
			}
		}
	}
	return out
}

// Consumer is a bolt subscribed to a stream.
type Consumer struct {
	Bolt  *Component
	Input Input
}

// Builder assembles a topology, as Storm's TopologyBuilder. Errors are collected and
// returned together by Build.
type Builder struct {
	comps []*Component
	errs  []error
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder { return &Builder{} }

// Declarer declares a component's output streams and, for bolts, its inputs.
type Declarer struct {
	b *Builder
	c *Component
}

// SetSpout adds a spout with parallelism tasks; factory builds each task's instance.
func (b *Builder) SetSpout(id string, factory func() Spout, parallelism int) *Declarer {
	return b.add(&Component{ID: id, Parallelism: parallelism, Spout: factory}, factory == nil)
}

// SetBolt adds a bolt with parallelism tasks; factory builds each task's instance.
func (b *Builder) SetBolt(id string, factory func() Bolt, parallelism int) *Declarer {
	return b.add(&Component{ID: id, Parallelism: parallelism, Bolt: factory}, factory == nil)
}

// SetBasicBolt adds an auto-acking bolt (see BasicBolt).
func (b *Builder) SetBasicBolt(id string, factory func() BasicBolt, parallelism int) *Declarer {
	return b.add(&Component{ID: id, Parallelism: parallelism, Basic: factory}, factory == nil)
}

func (b *Builder) add(c *Component, nilFactory bool) *Declarer {
	c.Streams = map[string]*Stream{}
	if nilFactory {
		b.errs = append(b.errs, fmt.Errorf("component %q: nil factory", c.ID))
	}
	b.comps = append(b.comps, c)
	return &Declarer{b: b, c: c}
}

// Output declares the default stream with the given fields.
func (d *Declarer) Output(fields ...string) *Declarer {
	return d.declare(tuple.DefaultStream, false, fields)
}

// OutputStream declares a named stream.
func (d *Declarer) OutputStream(stream string, fields ...string) *Declarer {
	return d.declare(stream, false, fields)
}

// DirectStream declares a named direct stream (emitted with EmitDirect only).
func (d *Declarer) DirectStream(stream string, fields ...string) *Declarer {
	return d.declare(stream, true, fields)
}

func (d *Declarer) declare(stream string, direct bool, fields []string) *Declarer {
	switch {
	case stream == "":
		d.b.errs = append(d.b.errs, fmt.Errorf("component %q: empty stream id", d.c.ID))
	case strings.HasPrefix(stream, "__"):
		d.b.errs = append(d.b.errs, fmt.Errorf("component %q: stream id %q is reserved (ids starting with __ are system ids)", d.c.ID, stream))
	case d.c.Streams[stream] != nil:
		d.b.errs = append(d.b.errs, fmt.Errorf("component %q: stream %q declared twice", d.c.ID, stream))
	default:
		f := tuple.NewFields(fields...)
		if err := f.Validate(); err != nil {
			d.b.errs = append(d.b.errs, fmt.Errorf("component %q stream %q: %v", d.c.ID, stream, err))
		}
		d.c.Streams[stream] = &Stream{Source: &tuple.Source{Component: d.c.ID, Stream: stream, Fields: f}, Direct: direct}
	}
	return d
}

// TickEvery makes every task of the bolt receive a tick tuple (tuple.IsTick) every d,
// interleaved with its inputs on the task's goroutine: the way to flush a batch after
// T ms (as Storm's tick tuples). Ticks are untracked.
func (d *Declarer) TickEvery(every time.Duration) *Declarer {
	switch {
	case d.c.IsSpout():
		d.b.errs = append(d.b.errs, fmt.Errorf("spout %q: tick tuples are for bolts", d.c.ID))
	case every <= 0:
		d.b.errs = append(d.b.errs, fmt.Errorf("bolt %q: tick interval %v, must be > 0", d.c.ID, every))
	default:
		d.c.TickEvery = every
	}
	return d
}

// Input subscribes the bolt to a component's stream with a grouping.
func (d *Declarer) Input(component, stream string, g Grouping) *Declarer {
	if d.c.IsSpout() {
		d.b.errs = append(d.b.errs, fmt.Errorf("spout %q cannot subscribe to %q: spouts have no inputs", d.c.ID, component))
		return d
	}
	d.c.Inputs = append(d.c.Inputs, Input{Component: component, Stream: stream, Grouping: g})
	return d
}

// ShuffleGrouping subscribes to the default stream of component with Shuffle.
func (d *Declarer) ShuffleGrouping(component string) *Declarer {
	return d.Input(component, tuple.DefaultStream, Shuffle())
}

// FieldsGrouping subscribes to the default stream of component, grouped by fields.
func (d *Declarer) FieldsGrouping(component string, fields ...string) *Declarer {
	return d.Input(component, tuple.DefaultStream, Fields(fields...))
}

// AllGrouping subscribes to the default stream of component with All.
func (d *Declarer) AllGrouping(component string) *Declarer {
	return d.Input(component, tuple.DefaultStream, All())
}

// GlobalGrouping subscribes to the default stream of component with Global.
func (d *Declarer) GlobalGrouping(component string) *Declarer {
	return d.Input(component, tuple.DefaultStream, Global())
}

// DirectGrouping subscribes to a direct stream of component.
func (d *Declarer) DirectGrouping(component, stream string) *Declarer {
	return d.Input(component, stream, Direct())
}

// LocalOrShuffleGrouping subscribes to the default stream of component.
func (d *Declarer) LocalOrShuffleGrouping(component string) *Declarer {
	return d.Input(component, tuple.DefaultStream, LocalOrShuffle())
}

// NoneGrouping subscribes to the default stream of component with None.
func (d *Declarer) NoneGrouping(component string) *Declarer {
	return d.Input(component, tuple.DefaultStream, None())
}

// CustomGrouping subscribes to a stream of component with user routing.
func (d *Declarer) CustomGrouping(component, stream string, factory func() CustomGrouping) *Declarer {
	return d.Input(component, stream, Custom(factory))
}

// Build validates the topology and returns it. Every problem found is reported,
// joined, each wrapping ErrTopology: unknown component or stream, fields grouping on
// an undeclared field, direct grouping on a non-direct stream (and the reverse),
// duplicate or reserved ids, parallelism < 1, a bolt without inputs, no spout, and
// cycles (which can deadlock under backpressure, STORM-3637).
func (b *Builder) Build() (*Topology, error) {
	errs := append([]error(nil), b.errs...)
	t := &Topology{byID: map[string]*Component{}}
	spouts := 0
	for _, c := range b.comps {
		switch {
		case c.ID == "":
			errs = append(errs, errors.New("component with an empty id"))
			continue
		case strings.HasPrefix(c.ID, "__"):
			errs = append(errs, fmt.Errorf("component id %q is reserved (ids starting with __ are system ids)", c.ID))
		case t.byID[c.ID] != nil:
			errs = append(errs, fmt.Errorf("component id %q is used twice", c.ID))
			continue
		}
		if c.Parallelism < 1 || c.Parallelism > MaxParallelism {
			errs = append(errs, fmt.Errorf("component %q: parallelism %d, must be 1 to %d", c.ID, c.Parallelism, MaxParallelism))
		}
		if c.IsSpout() {
			spouts++
		}
		t.byID[c.ID] = c
		t.Components = append(t.Components, c)
	}
	if spouts == 0 {
		errs = append(errs, errors.New("no spout"))
	}
	for _, c := range t.Components {
		if !c.IsSpout() && len(c.Inputs) == 0 {
			errs = append(errs, fmt.Errorf("bolt %q has no inputs", c.ID))
		}
		seen := map[[2]string]bool{}
		for _, in := range c.Inputs {
			key := [2]string{in.Component, in.Stream}
			if seen[key] {
				// Two subscriptions would deliver every tuple twice (Storm keeps one).
				errs = append(errs, fmt.Errorf("bolt %q subscribes to stream %q of %q twice", c.ID, in.Stream, in.Component))
				continue
			}
			seen[key] = true
			if err := checkInput(t, c, in); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		if cyc := findCycle(t); cyc != nil {
			errs = append(errs, fmt.Errorf("cycle %s: a cycle can deadlock under backpressure (STORM-3637)", strings.Join(cyc, " -> ")))
		}
	}
	if len(errs) > 0 {
		for i, e := range errs {
			errs[i] = fmt.Errorf("%w: %w", ErrTopology, e)
		}
		return nil, errors.Join(errs...)
	}
	return t, nil
}

func checkInput(t *Topology, c *Component, in Input) error {
	src := t.byID[in.Component]
	if src == nil {
		return fmt.Errorf("bolt %q subscribes to unknown component %q", c.ID, in.Component)
	}
	st := src.Streams[in.Stream]
	if st == nil {
		return fmt.Errorf("bolt %q subscribes to stream %q of %q, which %q does not declare", c.ID, in.Stream, in.Component, in.Component)
	}
	g := in.Grouping
	switch {
	case g.Kind == 0:
		return fmt.Errorf("bolt %q input %q/%q: no grouping given", c.ID, in.Component, in.Stream)
	case g.Kind > CustomKind:
		return fmt.Errorf("bolt %q input %q/%q: unknown grouping kind %d", c.ID, in.Component, in.Stream, g.Kind)
	case g.Kind != FieldsKind && len(g.Fields) > 0:
		return fmt.Errorf("bolt %q input %q/%q: %s grouping given fields %v (only fields grouping takes fields)", c.ID, in.Component, in.Stream, g.Kind, g.Fields)
	case g.Kind == DirectKind && !st.Direct:
		return fmt.Errorf("bolt %q uses direct grouping on stream %q of %q, which is not declared direct", c.ID, in.Stream, in.Component)
	case g.Kind != DirectKind && st.Direct:
		return fmt.Errorf("bolt %q uses %s grouping on direct stream %q of %q: direct streams need direct grouping", c.ID, g.Kind, in.Stream, in.Component)
	case g.Kind == FieldsKind && len(g.Fields) == 0:
		return fmt.Errorf("bolt %q: fields grouping on %q/%q names no fields", c.ID, in.Component, in.Stream)
	case g.Kind == CustomKind && g.Custom == nil:
		return fmt.Errorf("bolt %q: custom grouping on %q/%q has a nil factory", c.ID, in.Component, in.Stream)
	}
	for _, f := range g.Fields {
		if !st.Source.Fields.Contains(f) {
			return fmt.Errorf("bolt %q: fields grouping on %q, but stream %q of %q declares %v", c.ID, f, in.Stream, in.Component, st.Source.Fields)
		}
	}
	return nil
}

// findCycle returns the components of a cycle in the subscription graph, or nil.
func findCycle(t *Topology) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(id string) []string
	downstream := func(id string) []string {
		var out []string
		for _, c := range t.Components {
			for _, in := range c.Inputs {
				if in.Component == id && !slices.Contains(out, c.ID) {
					out = append(out, c.ID)
				}
			}
		}
		return out
	}
	visit = func(id string) []string {
		color[id] = grey
		stack = append(stack, id)
		for _, next := range downstream(id) {
			switch color[next] {
			case grey:
				i := slices.Index(stack, next)
				return append(append([]string(nil), stack[i:]...), next)
			case white:
				if cyc := visit(next); cyc != nil {
					return cyc
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return nil
	}
	for _, c := range t.Components {
		if color[c.ID] == white {
			if cyc := visit(c.ID); cyc != nil {
				return cyc
			}
		}
	}
	return nil
}
