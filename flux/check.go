package flux

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gale-stream/gale/topology"
)

// LogSpout is the component id a serve pipeline's streams read from (from: log).
const LogSpout = "log"

// check checks what needs the whole (merged) file: ids, refs, streams' ends, cycles.
func (f *File) check() error {
	var e errs
	comps := map[string]*Bean{}
	for _, c := range f.Components {
		comps[c.ID] = c
	}
	nodes := map[string]*Bean{} // spouts and bolts
	isSpout := map[string]bool{}
	for _, sec := range [][]*Bean{f.Spouts, f.Bolts} {
		for _, b := range sec {
			if prev := nodes[b.ID]; prev != nil {
				e.at(b.IDPos, "id %q is used twice (first at %s)", b.ID, prev.IDPos)
				continue
			}
			nodes[b.ID] = b
			isSpout[b.ID] = slices.Contains(f.Spouts, b)
		}
	}
	for _, b := range slices.Concat(f.Components, f.Spouts, f.Bolts) {
		if strings.HasPrefix(b.ID, "__") {
			e.at(b.IDPos, "id %q is reserved (ids starting with __ are system ids)", b.ID)
		}
		if b.Parallelism < 0 || b.Parallelism == 0 && b.ParallelismPos.Line != 0 || b.Parallelism > topology.MaxParallelism {
			e.at(b.ParallelismPos, "parallelism %d, must be 1 to %d", b.Parallelism, topology.MaxParallelism)
		}
		checkRef := func(id string, p Pos) {
			if comps[id] != nil {
				return
			}
			msg := fmt.Sprintf("ref %q names no components: entry", id)
			if nodes[id] != nil {
				msg += fmt.Sprintf(" (%q is a spout or bolt; a ref names a component)", id)
			} else if near := nearest(id, keys(comps)); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			e.at(p, "%s", msg)
		}
		for _, v := range b.values() {
			if v.Ref != "" {
				checkRef(v.Ref, v.Pos)
			}
			for _, r := range v.RefList {
				checkRef(r, v.Pos)
			}
		}
	}
	pipeline := len(f.Spouts) == 0
	fed := map[string]bool{}
	type sub struct{ from, stream, to string }
	subs := map[sub]*Stream{}
	for _, s := range f.Streams {
		ok := true
		switch {
		case nodes[s.From] != nil:
		case s.From == LogSpout && pipeline:
		default:
			ok = false
			e.at(s.FromPos, "stream from %q: no spout or bolt has that id%s", s.From, suggest(s.From, keys(nodes)))
		}
		switch {
		case nodes[s.To] == nil:
			ok = false
			e.at(s.ToPos, "stream to %q: no bolt has that id%s", s.To, suggest(s.To, keys(nodes)))
		case isSpout[s.To]:
			ok = false
			e.at(s.ToPos, "stream to %q, a spout: spouts have no inputs", s.To)
		}
		if !ok {
			continue
		}
		fed[s.To] = true
		k := sub{s.From, streamID(s), s.To}
		if prev := subs[k]; prev != nil {
			e.at(s.Pos, "bolt %q subscribes to stream %q of %q twice (first at line %d): it would get every tuple twice", s.To, k.stream, s.From, prev.Pos.Line)
			continue
		}
		subs[k] = s
	}
	for _, b := range f.Bolts {
		if !fed[b.ID] {
			e.at(b.IDPos, "bolt %q has no inputs: no stream is to it", b.ID)
		}
	}
	if len(e) == 0 {
		if s, cyc := f.cycle(); s != nil {
			e.at(s.Pos, "cycle %s: gale refuses cycles (they can deadlock under backpressure, STORM-3637)", strings.Join(cyc, " -> "))
		}
	}
	return e.err()
}

func streamID(s *Stream) string {
	if s.Grouping.StreamID == "" {
		return "default"
	}
	return s.Grouping.StreamID
}

func suggest(miss string, ids []string) string {
	if near := nearest(miss, ids); near != "" {
		return fmt.Sprintf("; did you mean %q?", near)
	}
	if len(ids) == 0 {
		return ""
	}
	return " (ids: " + strings.Join(ids, ", ") + ")"
}

func keys(m map[string]*Bean) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// values are every value of the bean that may hold refs.
func (b *Bean) values() []Value {
	out := slices.Clone(b.Args)
	for _, p := range b.Properties {
		out = append(out, p.Value)
	}
	for _, c := range b.Calls {
		out = append(out, c.Args...)
	}
	return out
}

// cycle returns the stream that closes a cycle of subscriptions and the cycle's ids.
func (f *File) cycle() (*Stream, []string) {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(id string) (*Stream, []string)
	visit = func(id string) (*Stream, []string) {
		color[id] = grey
		stack = append(stack, id)
		for _, s := range f.Streams {
			if s.From != id {
				continue
			}
			switch color[s.To] {
			case grey:
				i := slices.Index(stack, s.To)
				return s, append(slices.Clone(stack[i:]), s.To)
			case white:
				if s, c := visit(s.To); s != nil {
					return s, c
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[id] = black
		return nil, nil
	}
	for _, b := range slices.Concat(f.Spouts, f.Bolts) {
		if color[b.ID] == white {
			if s, c := visit(b.ID); s != nil {
				return s, c
			}
		}
	}
	return nil, nil
}
