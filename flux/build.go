package flux

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
)

// Built is a file built against a registry.
type Built struct {
	Topology *topology.Topology
	Config   topology.Config // topology.DefaultConfig() with the file's config applied
	Ignored  []string        // config keys gale does not know, in file order: show them in one line
	Workers  int             // topology.workers if set (0: not set)
	// Debug is topology.debug: the caller logs at debug level, where the engine logs
	// every tuple emitted, acked and failed (Storm's topology.debug logs emits).
	Debug bool
}

// Build builds the topology: classes looked up in reg, components: entries made
// first (for refs, in file order; a ref to a later entry makes it first), spouts and
// bolts declared through reg, streams as groupings checked against the streams each
// class declares, config mapped. Every refusal is an *Error with the line and column
// of what is wrong. A file without spouts is refused (it is a serve pipeline: see
// BuildPipeline).
func (f *File) Build(reg *component.Registry) (*Built, error) {
	var e errs
	if len(f.Spouts) == 0 {
		e.at(f.start(), "no spouts: a topology needs one (a file whose streams are from: log is a serve pipeline: gale serve --pipeline)")
		return nil, e.err()
	}
	return f.build(reg, nil, nil)
}

// BuildPipeline builds a serve pipeline: the file declares no spouts; its streams
// from: log read logSpout, declared with one task on the default stream with
// logFields. At least one bolt must be a sink: a bolt whose class declares no output
// stream (component.Declaration.Outputs nil or empty), which is where a pipeline's
// tuples leave gale.
func (f *File) BuildPipeline(reg *component.Registry, logSpout func() topology.Spout, logFields []string) (*Built, error) {
	var e errs
	for _, s := range f.Spouts {
		e.at(s.IDPos, "spout %q: a pipeline declares no spouts (its streams read from: %s, the log)", s.ID, LogSpout)
	}
	for _, b := range f.Bolts {
		if b.ID == LogSpout {
			e.at(b.IDPos, "bolt id %q is the log spout's in a pipeline", b.ID)
		}
	}
	if len(f.Bolts) == 0 {
		e.at(f.start(), "a pipeline without bolts: it needs at least one sink bolt")
	}
	if logSpout == nil {
		return nil, errors.New("flux: BuildPipeline: nil log spout")
	}
	if err := e.err(); err != nil {
		return nil, err
	}
	return f.build(reg, logSpout, logFields)
}

// start is where errors about the whole file point: its name, else its first line.
func (f *File) start() Pos {
	if f.NamePos.Line != 0 {
		return f.NamePos
	}
	for _, b := range slices.Concat(f.Components, f.Spouts, f.Bolts) {
		return Pos{b.Pos.File, 1, 1}
	}
	return Pos{"", 1, 1}
}

type builder struct {
	f      *File
	reg    *component.Registry
	e      errs
	comps  map[string]*Bean
	values map[string]any
	making map[string]bool
	failed map[string]bool
}

func (f *File) build(reg *component.Registry, logSpout func() topology.Spout, logFields []string) (*Built, error) {
	bd := &builder{f: f, reg: reg, comps: map[string]*Bean{}, values: map[string]any{}, making: map[string]bool{}, failed: map[string]bool{}}
	for _, c := range f.Components {
		bd.comps[c.ID] = c
	}
	for _, c := range f.Components {
		bd.make(c, nil)
	}
	b := topology.NewBuilder()
	outs := map[string][]component.Output{}
	decls := map[string]*topology.Declarer{}
	if logSpout != nil {
		b.SetSpout(LogSpout, logSpout, 1).Output(logFields...)
		outs[LogSpout] = []component.Output{{Stream: "default", Fields: logFields}}
	}
	for _, bean := range f.Spouts {
		if p, ok := bd.prepare(bean, true, nil); ok {
			decls[bean.ID], outs[bean.ID] = p.Declare(b, bean.Parallelism), p.Outputs()
		}
	}
	// A bolt's class runs once the components it reads did, so that its maker gets
	// the fields of its inputs (Spec.Inputs): an expression over them is checked at
	// build. Its sources are prepared first, depth first; in a cycle (which Load
	// refuses) a bolt met again gets the inputs known then. The bolts are then
	// declared in file order, which numbers the tasks.
	bolts := map[string]*Bean{}
	for _, bean := range f.Bolts {
		bolts[bean.ID] = bean
	}
	sources := map[string][]string{}
	for _, s := range f.Streams {
		sources[s.To] = append(sources[s.To], s.From)
	}
	prepared := map[string]*component.Prepared{}
	visited := map[string]bool{}
	var prep func(bean *Bean)
	prep = func(bean *Bean) {
		if visited[bean.ID] {
			return
		}
		visited[bean.ID] = true
		for _, from := range sources[bean.ID] {
			if src := bolts[from]; src != nil {
				prep(src)
			}
		}
		if p, ok := bd.prepare(bean, false, bd.inputs(bean, outs)); ok {
			prepared[bean.ID], outs[bean.ID] = p, p.Outputs()
		}
	}
	for _, bean := range f.Bolts {
		prep(bean)
	}
	for _, bean := range f.Bolts {
		if p := prepared[bean.ID]; p != nil {
			decls[bean.ID] = p.Declare(b, bean.Parallelism)
		}
	}
	sinks := 0
	for _, bean := range f.Bolts {
		if o, ok := outs[bean.ID]; ok && len(o) == 0 {
			sinks++
		}
	}
	for _, s := range f.Streams {
		bd.stream(s, decls, outs)
	}
	built := &Built{Config: topology.DefaultConfig()}
	built.Ignored = bd.config(built)
	if err := bd.e.err(); err != nil {
		return nil, err
	}
	if logSpout != nil && sinks == 0 {
		bd.e.at(f.start(), "no sink: a pipeline needs a bolt whose class declares no output stream (bolts: %s)", strings.Join(ids(f.Bolts), ", "))
		return nil, bd.e.err()
	}
	t, err := b.Build()
	if err != nil {
		// What the checks above let through: said as the builder says it.
		p := f.start()
		return nil, &Error{File: p.File, Line: p.Line, Col: p.Col, Msg: err.Error(), Err: err}
	}
	built.Topology = t
	return built, nil
}

func ids(bs []*Bean) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.ID
	}
	return out
}

// refuse records err, a component package error about bean, at the position of the
// value it names.
func (bd *builder) refuse(bean *Bean, err error) {
	p := bean.ClassPos
	var se *component.SpecError
	if errors.As(err, &se) {
		p = bean.place(se)
	}
	bd.e = append(bd.e, &Error{File: p.File, Line: p.Line, Col: p.Col, Msg: err.Error(), Err: err})
}

// place is where a SpecError points in bean: the value it names, or the string
// and character inside that value its Path and At name.
func (b *Bean) place(se *component.SpecError) Pos {
	first := func(ps ...Pos) Pos {
		for _, p := range ps {
			if p.Line != 0 {
				return p
			}
		}
		return b.ClassPos
	}
	in := func(v Value) Pos {
		if (len(se.Path) > 0 || se.At > 0) && v.Inner != nil {
			if p, ok := v.Inner(se.Path, se.At); ok {
				return p
			}
		}
		return v.Pos
	}
	switch {
	case se.Call >= 0 && se.Call < len(b.Calls):
		c := b.Calls[se.Call]
		if se.Arg >= 0 && se.Arg < len(c.Args) {
			return in(c.Args[se.Arg])
		}
		if se.Arg >= 0 {
			return first(c.ArgsPos, c.Pos)
		}
		return c.Pos
	case se.Arg >= 0 && se.Arg < len(b.Args):
		return in(b.Args[se.Arg])
	case se.Arg >= 0:
		return first(b.ArgsPos)
	case se.Prop != "":
		for _, p := range b.Properties {
			if p.Name == se.Prop {
				if len(se.Path) > 0 || se.At > 0 {
					return in(p.Value)
				}
				return p.Pos
			}
		}
		return first(b.PropertiesPos)
	}
	return b.ClassPos
}

// make makes components: entry c (once), making the entries it refers to first.
func (bd *builder) make(c *Bean, chain []string) (any, bool) {
	if v, ok := bd.values[c.ID]; ok {
		return v, true
	}
	if bd.failed[c.ID] {
		return nil, false
	}
	if bd.making[c.ID] {
		bd.e.at(c.IDPos, "components refer to each other: %s -> %s", strings.Join(chain, " -> "), c.ID)
		bd.failed[c.ID] = true
		return nil, false
	}
	bd.making[c.ID] = true
	defer delete(bd.making, c.ID)
	if bd.shell(c) {
		bd.failed[c.ID] = true
		return nil, false
	}
	spec, ok := bd.spec(c, append(chain, c.ID))
	if !ok {
		bd.failed[c.ID] = true
		return nil, false
	}
	v, err := bd.reg.Make(c.ID, c.Class, spec)
	if err != nil {
		bd.failed[c.ID] = true
		bd.refuse(c, err)
		return nil, false
	}
	bd.values[c.ID] = v
	return v, true
}

// shell refuses a shell component while no class of its name is registered.
func (bd *builder) shell(b *Bean) bool {
	if b.Class != ShellSpoutClass && b.Class != ShellBoltClass {
		return false
	}
	if _, err := bd.reg.Lookup(b.Class); err == nil {
		return false
	}
	p := b.ClassPos
	bd.e = append(bd.e, &Error{File: p.File, Line: p.Line, Col: p.Col, Err: ErrMultilang,
		Msg: fmt.Sprintf("%q (class %s): %v: a shell component runs a subprocess, which gale cannot do yet", b.ID, b.Class, ErrMultilang)})
	return true
}

func (bd *builder) resolve(v Value, chain []string) (any, bool) {
	switch {
	case v.Ref != "":
		c := bd.comps[v.Ref]
		if c == nil { // Load refused it already
			bd.e.at(v.Pos, "ref %q names no components: entry", v.Ref)
			return nil, false
		}
		return bd.make(c, chain)
	case v.IsList:
		out := make([]any, 0, len(v.RefList))
		ok := true
		for _, r := range v.RefList {
			x, good := bd.resolve(Value{Ref: r, Pos: v.Pos}, chain)
			ok = ok && good
			out = append(out, x)
		}
		return out, ok
	}
	return v.Literal, true
}

func (bd *builder) spec(b *Bean, chain []string) (component.Spec, bool) {
	var s component.Spec
	ok := true
	vals := func(vs []Value) []any {
		if vs == nil {
			return nil
		}
		out := make([]any, len(vs))
		for i, v := range vs {
			var good bool
			out[i], good = bd.resolve(v, chain)
			ok = ok && good
		}
		return out
	}
	s.Dir, s.Cluster = bd.f.Dir, bd.f.Cluster
	if len(bd.f.Config) > 0 {
		s.Config = make(map[string]any, len(bd.f.Config))
		for _, c := range bd.f.Config {
			s.Config[c.Key] = c.Value
		}
	}
	s.Args = vals(b.Args)
	if b.Properties != nil {
		s.Properties = map[string]any{}
		for _, p := range b.Properties {
			v, good := bd.resolve(p.Value, chain)
			ok = ok && good
			s.Properties[p.Name] = v
		}
	}
	for _, c := range b.Calls {
		s.Calls = append(s.Calls, component.Call{Name: c.Name, Args: vals(c.Args)})
	}
	return s, ok
}

// inputs are the streams bean reads, in file order, with the fields their
// components declared (those declared yet).
func (bd *builder) inputs(bean *Bean, outs map[string][]component.Output) []component.Input {
	var in []component.Input
	for _, s := range bd.f.Streams {
		if s.To != bean.ID {
			continue
		}
		id := streamID(s)
		for _, o := range outs[s.From] {
			if o.Stream == id {
				in = append(in, component.Input{Component: s.From, Stream: id, Fields: slices.Clone(o.Fields)})
			}
		}
	}
	return in
}

func (bd *builder) prepare(bean *Bean, spout bool, inputs []component.Input) (*component.Prepared, bool) {
	if bd.shell(bean) {
		return nil, false
	}
	d, err := bd.reg.Lookup(bean.Class)
	if err != nil {
		p := bean.ClassPos
		bd.e = append(bd.e, &Error{File: p.File, Line: p.Line, Col: p.Col, Msg: fmt.Sprintf("%q: %v", bean.ID, err), Err: err})
		return nil, false
	}
	switch k := d.Kind(); {
	case spout && k != component.SpoutKind:
		bd.e.at(bean.ClassPos, "spout %q: class %s is a %s, not a spout", bean.ID, bean.Class, k)
		return nil, false
	case !spout && k != component.BoltKind && k != component.BasicBoltKind:
		bd.e.at(bean.ClassPos, "bolt %q: class %s is a %s, not a bolt", bean.ID, bean.Class, k)
		return nil, false
	}
	spec, ok := bd.spec(bean, nil)
	if !ok {
		return nil, false
	}
	spec.Inputs = inputs
	p, err := bd.reg.Prepare(bean.ID, bean.Class, spec)
	if err != nil {
		bd.refuse(bean, err)
		return nil, false
	}
	return p, true
}

var groupings = map[string]func([]string) topology.Grouping{
	"SHUFFLE":          func([]string) topology.Grouping { return topology.Shuffle() },
	"FIELDS":           func(f []string) topology.Grouping { return topology.Fields(f...) },
	"ALL":              func([]string) topology.Grouping { return topology.All() },
	"GLOBAL":           func([]string) topology.Grouping { return topology.Global() },
	"NONE":             func([]string) topology.Grouping { return topology.None() },
	"DIRECT":           func([]string) topology.Grouping { return topology.Direct() },
	"LOCAL_OR_SHUFFLE": func([]string) topology.Grouping { return topology.LocalOrShuffle() },
}

func (bd *builder) stream(s *Stream, decls map[string]*topology.Declarer, outs map[string][]component.Output) {
	d, ok := decls[s.To]
	src, ok2 := outs[s.From]
	if !ok2 {
		if s.From == LogSpout && len(bd.f.Spouts) > 0 {
			bd.e.at(s.FromPos, "stream from %q: no spout or bolt has that id", s.From)
		}
		return // the component's own error is reported
	}
	id := streamID(s)
	i := indexOf(src, func(o component.Output) bool { return o.Stream == id })
	g := s.Grouping
	if i < 0 {
		// Said even when the bolt it goes to was refused: an expression bolt is
		// refused for want of its input's fields, whose cause is this.
		p := g.StreamIDPos
		if p.Line == 0 {
			p = s.FromPos
		}
		bd.e.at(p, "stream %q of %q is not declared: %q declares %s", id, s.From, s.From, describeOutputs(src))
		return
	}
	if !ok {
		return // the bolt's own error is reported
	}
	o := src[i]
	switch {
	case o.Direct && g.Type != "DIRECT":
		bd.e.at(g.TypePos, "%s grouping on stream %q of %q, which is direct: a direct stream takes a DIRECT grouping", g.Type, id, s.From)
		return
	case !o.Direct && g.Type == "DIRECT":
		bd.e.at(g.TypePos, "DIRECT grouping on stream %q of %q, which is not declared direct", id, s.From)
		return
	}
	for _, field := range g.Fields {
		if !slices.Contains(o.Fields, field) {
			bd.e.at(g.FieldsPos, "FIELDS grouping on %q, which stream %q of %q does not declare (its fields: %s)", field, id, s.From, strings.Join(o.Fields, ", "))
			return
		}
	}
	d.Input(s.From, id, groupings[g.Type](g.Fields))
}

func describeOutputs(outs []component.Output) string {
	if len(outs) == 0 {
		return "no stream (a sink)"
	}
	var parts []string
	for _, o := range outs {
		parts = append(parts, fmt.Sprintf("%q [%s]", o.Stream, strings.Join(o.Fields, ", ")))
	}
	return strings.Join(parts, ", ")
}

// StormConfig lists the Storm config keys gale maps, with what each sets.
var StormConfig = []struct{ Key, Sets string }{
	{"topology.workers", "Built.Workers (the processes a submit asks for)"},
	{"topology.acker.executors", "Config.Ackers"},
	{"topology.max.spout.pending", "Config.MaxSpoutPending"},
	{"topology.message.timeout.secs", "Config.MessageTimeout"},
	{"topology.enable.message.timeouts", "Config.DisableTimeouts (negated)"},
	{"topology.executor.receive.buffer.size", "Config.ReceiveQueue"},
	{"topology.transfer.batch.size", "Config.BatchSize"},
	{"topology.batch.flush.interval.millis", "Config.FlushInterval"},
	{"topology.debug", "Built.Debug"},
	{"topology.subprocess.timeout.secs", "the shell components' subprocess timeout (their Spec.Config)"},
}

// config applies the file's config to built and returns the keys it ignored.
func (bd *builder) config(built *Built) []string {
	var ignored []string
	c := &built.Config
	for _, s := range bd.f.Config {
		p := s.Pos
		integer := func(min int) (int, bool) {
			n, ok := s.Value.(int)
			if !ok {
				bd.e.at(p, "%s: want an integer, got %v", s.Key, describe(s.Value))
				return 0, false
			}
			if n < min {
				bd.e.at(p, "%s: %d, must be at least %d", s.Key, n, min)
				return 0, false
			}
			return n, true
		}
		// duration is integer for a key counted in unit: a value past what a
		// time.Duration holds would wrap (to a negative or a tiny duration).
		duration := func(min int, unit time.Duration) (time.Duration, bool) {
			n, ok := integer(min)
			if ok && n > int(math.MaxInt64/unit) {
				bd.e.at(p, "%s: %d, must be at most %d", s.Key, n, math.MaxInt64/unit)
				return 0, false
			}
			return time.Duration(n) * unit, ok
		}
		boolean := func() (bool, bool) {
			b, ok := s.Value.(bool)
			if !ok {
				bd.e.at(p, "%s: want true or false, got %v", s.Key, describe(s.Value))
			}
			return b, ok
		}
		switch s.Key {
		case "topology.workers":
			if n, ok := integer(1); ok {
				built.Workers = n
			}
		case "topology.acker.executors":
			if n, ok := integer(0); ok {
				c.Ackers = n
			}
		case "topology.max.spout.pending":
			if s.Value == nil { // Storm's null: unlimited
				c.MaxSpoutPending = 0
			} else if n, ok := integer(0); ok {
				c.MaxSpoutPending = n
			}
		case "topology.message.timeout.secs":
			if d, ok := duration(1, time.Second); ok {
				c.MessageTimeout = d
			}
		case "topology.enable.message.timeouts":
			if b, ok := boolean(); ok {
				c.DisableTimeouts = !b
			}
		case "topology.executor.receive.buffer.size":
			if n, ok := integer(1); ok {
				c.ReceiveQueue = n
			}
		case "topology.transfer.batch.size":
			if n, ok := integer(1); ok {
				c.BatchSize = n
			}
		case "topology.batch.flush.interval.millis":
			if d, ok := duration(0, time.Millisecond); ok {
				c.FlushInterval = d
			}
		case "topology.debug":
			if b, ok := boolean(); ok {
				built.Debug = b
			}
		case "topology.subprocess.timeout.secs":
			duration(1, time.Second) // checked here; the shell classes read it from Spec.Config
		default:
			ignored = append(ignored, s.Key)
		}
	}
	if err := c.Validate(); err != nil && len(bd.e) == 0 {
		p := bd.f.start()
		for _, s := range bd.f.Config {
			p = s.Pos // the config as a whole: point at its last key
		}
		bd.e = append(bd.e, &Error{File: p.File, Line: p.Line, Col: p.Col, Msg: err.Error(), Err: err})
	}
	return ignored
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", x)
	}
	return fmt.Sprintf("%T %v", v, v)
}
