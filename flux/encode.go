package flux

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// encode writes f as one resolved YAML document (no includes, nothing to substitute).
func (f *File) encode() ([]byte, error) {
	root := mapNode()
	if f.Name != "" {
		add(root, "name", str(f.Name))
	}
	if len(f.Config) > 0 {
		m := mapNode()
		for _, s := range f.Config {
			add(m, s.Key, lit(s.Value))
		}
		add(root, "config", m)
	}
	for _, sec := range []struct {
		key   string
		beans []*Bean
	}{{"components", f.Components}, {"spouts", f.Spouts}, {"bolts", f.Bolts}} {
		if len(sec.beans) == 0 {
			continue
		}
		l := seqNode()
		for _, b := range sec.beans {
			l.Content = append(l.Content, b.node(sec.key != "components"))
		}
		add(root, sec.key, l)
	}
	if len(f.Streams) > 0 {
		l := seqNode()
		for _, s := range f.Streams {
			m := mapNode()
			if s.Name != "" {
				add(m, "name", str(s.Name))
			}
			add(m, "from", str(s.From))
			add(m, "to", str(s.To))
			g := mapNode()
			add(g, "type", str(s.Grouping.Type))
			if s.Grouping.Fields != nil {
				add(g, "args", lit(toAny(s.Grouping.Fields)))
			}
			if s.Grouping.StreamID != "" {
				add(g, "streamId", str(s.Grouping.StreamID))
			}
			add(m, "grouping", g)
			l.Content = append(l.Content, m)
		}
		add(root, "streams", l)
	}
	out, err := yaml.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("flux: encoding the resolved file: %w", err)
	}
	return out, nil
}

func (b *Bean) node(parallelism bool) *yaml.Node {
	m := mapNode()
	add(m, "id", str(b.ID))
	add(m, "className", str(b.Class))
	if parallelism {
		add(m, "parallelism", lit(b.Parallelism))
	}
	if b.Args != nil {
		add(m, "constructorArgs", values(b.Args))
	}
	if b.Properties != nil {
		l := seqNode()
		for _, p := range b.Properties {
			pm := mapNode()
			add(pm, "name", str(p.Name))
			switch v := p.Value; {
			case v.Ref != "":
				add(pm, "ref", str(v.Ref))
			case v.IsList:
				add(pm, "reflist", lit(toAny(v.RefList)))
			default:
				add(pm, "value", lit(v.Literal))
			}
			l.Content = append(l.Content, pm)
		}
		add(m, "properties", l)
	}
	if b.Calls != nil {
		l := seqNode()
		for _, c := range b.Calls {
			cm := mapNode()
			add(cm, "name", str(c.Name))
			if c.Args != nil {
				add(cm, "args", values(c.Args))
			}
			l.Content = append(l.Content, cm)
		}
		add(m, "configMethods", l)
	}
	return m
}

func values(vs []Value) *yaml.Node {
	l := seqNode()
	for _, v := range vs {
		var n *yaml.Node
		switch {
		case v.Ref != "":
			n = mapNode()
			add(n, "ref", str(v.Ref))
		case v.IsList:
			n = mapNode()
			add(n, "reflist", lit(toAny(v.RefList)))
		default:
			n = lit(v.Literal)
		}
		l.Content = append(l.Content, n)
	}
	return l
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func mapNode() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"} }
func seqNode() *yaml.Node { return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"} }

func str(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.Contains(s, "\n") {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}

func add(m *yaml.Node, key string, v *yaml.Node) { m.Content = append(m.Content, str(key), v) }

// lit is a decoded literal as a node that decodes back to the same value: a float
// keeps a decimal point, a string stays a string.
func lit(v any) *yaml.Node {
	scalar := func(tag, s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: s} }
	switch x := v.(type) {
	case nil:
		return scalar("!!null", "null")
	case string:
		return str(x)
	case bool:
		return scalar("!!bool", strconv.FormatBool(x))
	case int:
		return scalar("!!int", strconv.Itoa(x))
	case int64:
		return scalar("!!int", strconv.FormatInt(x, 10))
	case uint64:
		return scalar("!!int", strconv.FormatUint(x, 10))
	case float64:
		switch {
		case math.IsInf(x, 1):
			return scalar("!!float", ".inf")
		case math.IsInf(x, -1):
			return scalar("!!float", "-.inf")
		case math.IsNaN(x):
			return scalar("!!float", ".nan")
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return scalar("!!float", s)
	case []any:
		l := seqNode()
		l.Style = yaml.FlowStyle
		for _, e := range x {
			c := lit(e)
			if c.Kind != yaml.ScalarNode {
				l.Style = 0
			}
			l.Content = append(l.Content, c)
		}
		return l
	case map[string]any:
		m := mapNode()
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			add(m, k, lit(x[k]))
		}
		return m
	}
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return str(fmt.Sprint(v))
	}
	return n
}
