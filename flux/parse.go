package flux

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gale-stream/gale/internal/editdist"
)

// Parse parses an already-resolved document (no substitution, no includes): what a
// worker gets from the submitter (File.Resolved). name is the file name errors give.
// It checks the structure as Load does; a document with includes is refused.
func Parse(name string, resolved []byte) (*File, error) {
	f, err := parseDoc(name, resolved, false, nil)
	if err != nil {
		return nil, err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.Resolved, err = f.encode(); err != nil {
		return nil, err
	}
	return f, nil
}

type parser struct {
	name  string
	lines []string // the text, for places inside a value (inner)
	// shifts: by line, how its substitutions moved its columns (substitute)
	shifts map[int][]shift
	e      errs
}

func (p *parser) pos(n *yaml.Node) Pos { return p.at(n.Line, n.Column) }

// at is the file's place of line and column of the text parsed: columns after a
// substitution on the line move back to the file's.
func (p *parser) at(line, col int) Pos {
	if s, ok := p.shifts[line]; ok {
		col = fileCol(s, col)
	}
	return Pos{File: p.name, Line: line, Col: col}
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parseDoc parses one file's text into a File, checking what one file alone shows:
// YAML syntax, known keys, types, ids unique in their section.
func parseDoc(name string, data []byte, allowIncludes bool, shifts map[int][]shift) (*File, error) {
	p := &parser{name: name, lines: strings.Split(string(data), "\n"), shifts: shifts}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, Pos{name, 1, 1}.errorf("empty file: a Flux file is a YAML mapping (name, config, spouts, bolts, streams...)")
		}
		return nil, syntaxError(name, data, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, p.pos(&more).errorf("a second YAML document: a Flux file is one document")
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(name, data, err)
	}
	if err := aliasBound(name, &doc); err != nil {
		return nil, err
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	f := &File{}
	for _, kv := range p.mapping(root, "the file", topKeys, topRefused) {
		switch kv.key {
		case "name":
			f.Name, _ = p.str(kv.v, "name")
			f.NamePos = p.pos(kv.v)
		case "config":
			for _, c := range p.mapping(kv.v, "config", nil, nil) {
				f.Config = append(f.Config, Setting{Key: c.key, Value: p.literal(c.v), Pos: p.pos(c.k)})
			}
		case "components":
			f.Components = p.beans(kv.v, "component")
		case "spouts":
			f.Spouts = p.beans(kv.v, "spout")
		case "bolts":
			f.Bolts = p.beans(kv.v, "bolt")
		case "streams":
			for _, n := range p.seq(kv.v, "streams") {
				if s := p.stream(n); s != nil {
					f.Streams = append(f.Streams, s)
				}
			}
		case "includes":
			if !allowIncludes {
				p.e.at(p.pos(kv.k), "includes in an included or resolved file: includes are not recursive (Flux ignores an included file's includes; gale refuses them)")
				break
			}
			for _, n := range p.seq(kv.v, "includes") {
				p.include(f, n)
			}
		}
	}
	if err := p.e.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// syntaxError places a YAML syntax error. The parser gives a line (often that of the
// enclosing block) and no column, so the problem line is found as the first line at
// which a prefix of the file stops parsing; the column is that line's first character
// that is not a space. The parser's line is kept when no prefix fails.
func syntaxError(name string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	lines := strings.Split(string(data), "\n")
	if len(lines) <= 5000 {
		for k := 1; k <= len(lines); k++ {
			var n yaml.Node
			if yaml.Unmarshal([]byte(strings.Join(lines[:k], "\n")), &n) != nil {
				line = k
				break
			}
		}
	}
	col := 1
	if line-1 < len(lines) {
		l := lines[line-1]
		col = len(l) - len(strings.TrimLeft(l, " \t")) + 1
	}
	return Pos{name, line, col}.errorf("YAML syntax: %s", msg)
}

var (
	topKeys    = []string{"name", "config", "components", "spouts", "bolts", "streams", "includes"}
	topRefused = map[string]string{
		"topologySource": "topologySource names a Java class that builds the topology: no meaning in Go (declare spouts, bolts and streams)",
		"workerHooks":    "workerHooks are Java classes run in each worker: gale has no worker hooks",
	}
	beanKeys      = []string{"id", "className", "parallelism", "constructorArgs", "properties", "configMethods"}
	componentKeys = []string{"id", "className", "constructorArgs", "properties", "configMethods"}
	beanRefused   = map[string]string{
		"factory":           "static factory methods have no meaning in Go: the registered class's maker takes constructorArgs",
		"factoryArgs":       "static factory methods have no meaning in Go: the registered class's maker takes constructorArgs",
		"numTasks":          "gale runs one task per executor: parallelism is the number of tasks",
		"onHeapMemoryLoad":  "resource-aware scheduling is not gale's",
		"offHeapMemoryLoad": "resource-aware scheduling is not gale's",
		"cpuLoad":           "resource-aware scheduling is not gale's",
	}
	streamKeys    = []string{"name", "from", "to", "grouping"}
	groupingKeys  = []string{"type", "args", "streamId"}
	groupRefused  = map[string]string{"customClass": "CUSTOM groupings name a Java class: no meaning in Go"}
	includeKeys   = []string{"resource", "file", "override"}
	groupingTypes = []string{"SHUFFLE", "FIELDS", "ALL", "GLOBAL", "NONE", "DIRECT", "LOCAL_OR_SHUFFLE"}
)

// MaxAliasNodes bounds how many nodes a file's aliases add to it once expanded.
// The YAML decoder bounds aliasing within one decoded value only, and each config
// value, argument and property is decoded apart, so a 270 KB file of 20,000 config
// keys each an alias of ~900 nodes took 6 GB and half a minute before the process
// died.
const MaxAliasNodes = 100_000

// aliasBound refuses a document whose aliases expand to more than MaxAliasNodes
// nodes, at the alias that passes the bound.
func aliasBound(name string, doc *yaml.Node) error {
	memo := map[*yaml.Node]int{}
	var size func(n *yaml.Node) int
	size = func(n *yaml.Node) int {
		if n == nil {
			return 0
		}
		if n.Kind == yaml.AliasNode {
			return size(n.Alias)
		}
		if v, ok := memo[n]; ok {
			return v
		}
		memo[n] = 1 // an anchor within itself (the decoder refuses it anyway)
		total := 1
		for _, c := range n.Content {
			total = min(total+size(c), MaxAliasNodes+1)
		}
		memo[n] = total
		return total
	}
	added := 0
	var walk func(n *yaml.Node) *yaml.Node
	walk = func(n *yaml.Node) *yaml.Node {
		if n.Kind == yaml.AliasNode {
			if added += size(n.Alias); added > MaxAliasNodes {
				return n
			}
			return nil
		}
		for _, c := range n.Content {
			if bad := walk(c); bad != nil {
				return bad
			}
		}
		return nil
	}
	if bad := walk(doc); bad != nil {
		return Pos{name, bad.Line, bad.Column}.errorf("aliases expand to more than %d nodes: a file this aliased is refused (YAML alias expansion)", MaxAliasNodes)
	}
	return nil
}

type keyValue struct {
	key  string
	k, v *yaml.Node
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// mapping returns n's entries, refusing a non-mapping, a key twice, a refused key
// (with its reason) and, when keys is not nil, a key not in keys.
func (p *parser) mapping(n *yaml.Node, what string, keys []string, refused map[string]string) []keyValue {
	n = deref(n)
	if n.Kind != yaml.MappingNode {
		p.e.at(p.pos(n), "%s: want a mapping, got %s", what, kind(n))
		return nil
	}
	var out []keyValue
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			p.e.at(p.pos(k), "%s: a key must be a string, got %s", what, kind(k))
			continue
		}
		if prev := seen[k.Value]; prev != nil {
			p.e.at(p.pos(k), "%s: key %q given twice (first at line %d)", what, k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		if why, ok := refused[k.Value]; ok {
			p.e.at(p.pos(k), "%s: %s", k.Value, why)
			continue
		}
		if keys != nil && !slices.Contains(keys, k.Value) {
			msg := fmt.Sprintf("unknown key %q in %s", k.Value, what)
			if near := nearest(k.Value, keys); near != "" {
				msg += fmt.Sprintf("; did you mean %q?", near)
			}
			p.e.at(p.pos(k), "%s (it takes %s)", msg, strings.Join(keys, ", "))
			continue
		}
		out = append(out, keyValue{k.Value, k, v})
	}
	return out
}

func (p *parser) seq(n *yaml.Node, what string) []*yaml.Node {
	n = deref(n)
	if n.Kind != yaml.SequenceNode {
		p.e.at(p.pos(n), "%s: want a list, got %s", what, kind(n))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = deref(c)
	}
	return out
}

func kind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("string %q", n.Value)
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!bool":
			return "bool " + n.Value
		}
		return n.ShortTag() + " " + n.Value
	}
	return "an unexpected YAML node"
}

func (p *parser) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		p.e.at(p.pos(n), "%s: want a string, got %s", what, kind(n))
		return "", false
	}
	return n.Value, true
}

func (p *parser) nonEmpty(n *yaml.Node, what string) string {
	s, ok := p.str(n, what)
	if ok && s == "" {
		p.e.at(p.pos(n), "%s is empty", what)
	}
	return s
}

func (p *parser) integer(n *yaml.Node, what string) (int, bool) {
	var i int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
		p.e.at(p.pos(n), "%s: want an integer, got %s", what, kind(n))
		return 0, false
	}
	return i, true
}

func (p *parser) boolean(n *yaml.Node, what string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		p.e.at(p.pos(n), "%s: want true or false, got %s", what, kind(n))
	}
	return b
}

func (p *parser) literal(n *yaml.Node) any {
	var v any
	if err := n.Decode(&v); err != nil {
		p.e.at(p.pos(n), "%v", err)
	}
	return v
}

func (p *parser) beans(n *yaml.Node, what string) []*Bean {
	keys, section := beanKeys, what+"s"
	if what == "component" {
		keys = componentKeys
	}
	var out []*Bean
	ids := map[string]*Bean{}
	for _, item := range p.seq(n, section) {
		b := &Bean{Pos: p.pos(item)}
		if what != "component" {
			b.Parallelism = 1
		}
		var hasID, hasClass bool
		for _, kv := range p.mapping(item, "a "+what, keys, beanRefused) {
			switch kv.key {
			case "id":
				b.ID, b.IDPos, hasID = p.nonEmpty(kv.v, what+" id"), p.pos(kv.v), true
			case "className":
				b.Class, b.ClassPos, hasClass = p.nonEmpty(kv.v, "className"), p.pos(kv.v), true
			case "parallelism":
				b.ParallelismPos = p.pos(kv.v)
				b.Parallelism, _ = p.integer(kv.v, "parallelism")
			case "constructorArgs":
				b.ArgsPos = p.pos(kv.k)
				b.Args = p.values(kv.v, "constructorArgs")
			case "properties":
				b.PropertiesPos = p.pos(kv.k)
				b.Properties = p.properties(kv.v)
			case "configMethods":
				b.Calls = p.calls(kv.v)
			}
		}
		if item.Kind != yaml.MappingNode {
			continue
		}
		if !hasID {
			p.e.at(b.Pos, "a %s without an id", what)
		}
		if !hasClass {
			p.e.at(b.Pos, "%s %q has no className", what, b.ID)
		}
		if prev := ids[b.ID]; prev != nil && b.ID != "" {
			p.e.at(b.IDPos, "%s id %q is used twice (first at line %d)", what, b.ID, prev.IDPos.Line)
			continue
		}
		ids[b.ID] = b
		out = append(out, b)
	}
	return out
}

// values parses constructorArgs or a call's args: a list of literals and
// {ref: id} / {reflist: [ids]}.
func (p *parser) values(n *yaml.Node, what string) []Value {
	var out []Value
	for i, item := range p.seq(n, what) {
		out = append(out, p.value(item, fmt.Sprintf("%s[%d]", what, i)))
	}
	return out
}

func (p *parser) value(n *yaml.Node, what string) Value {
	v := Value{Pos: p.pos(n)}
	if n.Kind == yaml.MappingNode && len(n.Content) >= 2 {
		k := deref(n.Content[0]).Value
		if k == "ref" || k == "reflist" {
			if len(n.Content) != 2 {
				p.e.at(p.pos(n.Content[2]), "%s: a %s takes no other key", what, k)
				return v
			}
			if k == "ref" {
				v.Ref = p.nonEmpty(deref(n.Content[1]), what+" ref")
				v.Pos = p.pos(deref(n.Content[1]))
				return v
			}
			v.IsList, v.RefList, v.Pos = true, []string{}, p.pos(deref(n.Content[1]))
			for _, r := range p.seq(n.Content[1], what+" reflist") {
				v.RefList = append(v.RefList, p.nonEmpty(r, what+" reflist item"))
			}
			return v
		}
	}
	v.Literal, v.Inner = p.literal(n), p.inner(n)
	return v
}

func (p *parser) properties(n *yaml.Node) []Property {
	var out []Property
	seen := map[string]Pos{}
	for _, item := range p.seq(n, "properties") {
		var pr Property
		var val *yaml.Node
		var valKey string
		for _, kv := range p.mapping(item, "a property", []string{"name", "value", "ref", "reflist"}, nil) {
			switch kv.key {
			case "name":
				pr.Name, pr.Pos = p.nonEmpty(kv.v, "property name"), p.pos(kv.v)
			default:
				if val != nil {
					p.e.at(p.pos(kv.k), "a property takes one of value, ref and reflist (%s and %s given)", valKey, kv.key)
					continue
				}
				val, valKey = kv.v, kv.key
				if kv.key == "value" {
					pr.Value = Value{Literal: p.literal(kv.v), Pos: p.pos(kv.v), Inner: p.inner(kv.v)}
				} else {
					// the same shape as a constructor argument's ref
					pr.Value = p.value(&yaml.Node{Kind: yaml.MappingNode, Line: item.Line, Column: item.Column, Content: []*yaml.Node{kv.k, kv.v}}, "property "+strconv.Quote(pr.Name))
				}
			}
		}
		if item.Kind != yaml.MappingNode {
			continue
		}
		if pr.Pos.Line == 0 {
			p.e.at(p.pos(item), "a property without a name")
			continue
		}
		if val == nil {
			p.e.at(pr.Pos, "property %q has no value, ref or reflist", pr.Name)
			continue
		}
		if prev, ok := seen[pr.Name]; ok {
			p.e.at(pr.Pos, "property %q is given twice (first at line %d)", pr.Name, prev.Line)
			continue
		}
		seen[pr.Name] = pr.Pos
		out = append(out, pr)
	}
	return out
}

func (p *parser) calls(n *yaml.Node) []Call {
	var out []Call
	for i, item := range p.seq(n, "configMethods") {
		var c Call
		for _, kv := range p.mapping(item, "a configMethod", []string{"name", "args"}, nil) {
			switch kv.key {
			case "name":
				c.Name, c.Pos = p.nonEmpty(kv.v, "configMethod name"), p.pos(kv.v)
			case "args":
				c.ArgsPos = p.pos(kv.k)
				c.Args = p.values(kv.v, fmt.Sprintf("configMethods[%d] args", i))
			}
		}
		if item.Kind != yaml.MappingNode {
			continue
		}
		if c.Pos.Line == 0 {
			p.e.at(p.pos(item), "a configMethod without a name")
			continue
		}
		out = append(out, c)
	}
	return out
}

func (p *parser) stream(n *yaml.Node) *Stream {
	s := &Stream{Pos: p.pos(n)}
	var hasFrom, hasTo, hasGrouping bool
	for _, kv := range p.mapping(n, "a stream", streamKeys, nil) {
		switch kv.key {
		case "name":
			s.Name, _ = p.str(kv.v, "stream name")
		case "from":
			s.From, s.FromPos, hasFrom = p.nonEmpty(kv.v, "from"), p.pos(kv.v), true
		case "to":
			s.To, s.ToPos, hasTo = p.nonEmpty(kv.v, "to"), p.pos(kv.v), true
		case "grouping":
			hasGrouping = true
			p.grouping(s, kv.v)
		}
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for _, m := range []struct {
		has  bool
		what string
	}{{hasFrom, "from"}, {hasTo, "to"}, {hasGrouping, "grouping"}} {
		if !m.has {
			p.e.at(s.Pos, "a stream without %s", m.what)
		}
	}
	return s
}

func (p *parser) grouping(s *Stream, n *yaml.Node) {
	g := &s.Grouping
	g.Pos = p.pos(n)
	hasType := false
	for _, kv := range p.mapping(n, "a grouping", groupingKeys, groupRefused) {
		switch kv.key {
		case "type":
			hasType, g.TypePos = true, p.pos(kv.v)
			t, ok := p.str(kv.v, "grouping type")
			if !ok {
				continue
			}
			g.Type = t
			switch {
			case t == "CUSTOM":
				p.e.at(g.TypePos, "CUSTOM groupings name a Java class: no meaning in Go (use one of %s)", strings.Join(groupingTypes, ", "))
			case !slices.Contains(groupingTypes, t):
				msg := fmt.Sprintf("unknown grouping type %q", t)
				if near := nearest(t, groupingTypes); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", near)
				}
				p.e.at(g.TypePos, "%s (types: %s)", msg, strings.Join(groupingTypes, ", "))
			}
		case "args":
			g.FieldsPos = p.pos(kv.v)
			g.Fields = []string{}
			for _, f := range p.seq(kv.v, "grouping args") {
				name, _ := p.str(f, "grouping field")
				g.Fields = append(g.Fields, name)
			}
		case "streamId":
			g.StreamID, _ = p.str(kv.v, "streamId")
			g.StreamIDPos = p.pos(kv.v)
		}
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	switch {
	case !hasType:
		p.e.at(g.Pos, "a grouping without a type (%s)", strings.Join(groupingTypes, ", "))
	case g.Type == "FIELDS" && len(g.Fields) == 0:
		p.e.at(g.TypePos, "a FIELDS grouping needs args: the fields to group on")
	case g.Type != "FIELDS" && g.Fields != nil && g.Type != "CUSTOM":
		p.e.at(g.FieldsPos, "a grouping of type %s takes no args (only FIELDS does)", g.Type)
	}
}

func (p *parser) include(f *File, n *yaml.Node) {
	var in include
	hasFile := false
	for _, kv := range p.mapping(n, "an include", includeKeys, nil) {
		switch kv.key {
		case "resource":
			if p.boolean(kv.v, "resource") {
				p.e.at(p.pos(kv.v), "resource: true loads from a Java classpath: no meaning in Go (name a file, relative to this one)")
			}
		case "file":
			in.file, in.pos, hasFile = p.nonEmpty(kv.v, "include file"), p.pos(kv.v), true
		case "override":
			in.override = p.boolean(kv.v, "override")
		}
	}
	if n.Kind == yaml.MappingNode && !hasFile {
		p.e.at(p.pos(n), "an include without a file")
	}
	if hasFile {
		f.includes = append(f.includes, in)
	}
}

// nearest returns the candidate closest to a miss (equal but for case, or a few
// edits away), or "".
func nearest(miss string, candidates []string) string {
	best, bestD := "", 0
	for _, c := range candidates {
		d := editdist.Levenshtein(strings.ToLower(miss), strings.ToLower(c))
		if d <= 2+len(miss)/8 && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}
