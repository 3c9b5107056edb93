package flux

import "github.com/gale-stream/gale/component"

// File is a Flux file, parsed and checked: its includes merged, every value with its
// position (in the file it came from) for the errors of Build.
type File struct {
	Name    string // the topology's name (name:)
	NamePos Pos

	Config     []Setting // config:, in file order
	Components []*Bean   // components: values for ref, no parallelism
	Spouts     []*Bean
	Bolts      []*Bean
	Streams    []*Stream

	// Notes say what includes did not change because their override was false (Flux
	// logs the same as warnings), each "FILE:LINE:COL: ...". A caller shows them.
	Notes []string

	// Resolved is the whole resolved document (substituted, includes merged) as YAML:
	// what a submitter ships. Parse(name, Resolved) gives back an equal File (but for
	// positions, which then point into Resolved).
	Resolved []byte

	// Dir is what every component's Spec.Dir is: the file's directory after Load,
	// "" after Parse (a worker sets its unpacked resources directory).
	Dir string
	// Cluster is what every component's Spec.Cluster is: nil for a run in one
	// process; set by the submitter and by a worker (component.Cluster).
	Cluster *component.Cluster

	includes []include // Load's, before merging
}

// Setting is one config: key.
type Setting struct {
	Key   string
	Value any
	Pos   Pos // the key's
}

// Bean is a component, spout or bolt: Flux's bean definition.
type Bean struct {
	ID          string
	Class       string
	Parallelism int // spouts and bolts: default 1; components: 0
	Args        []Value
	Properties  []Property
	Calls       []Call // configMethods

	Pos, IDPos, ClassPos, ParallelismPos, ArgsPos, PropertiesPos Pos
}

// Value is one argument or property value: a literal, a ref to a components: entry
// or a reflist of them.
type Value struct {
	Literal any      // as the YAML decoder gives it, when Ref and RefList are unset
	Ref     string   // ref: id
	RefList []string // reflist: [ids]; non-nil when given
	IsList  bool     // RefList was given (possibly empty)
	Pos     Pos

	// Inner is where inside the literal a place is: the string that path reaches
	// (map keys and list positions) and the character at byte offset at-1 of it
	// (at 0: the string itself), as a component.SpecError's Path and At name it.
	// Like Pos, it points into the text the file was parsed from; nil when unknown.
	Inner func(path []any, at int) (Pos, bool)
}

// Property is one of properties: {name, value} or {name, ref} or {name, reflist}.
type Property struct {
	Name  string
	Value Value
	Pos   Pos // the name's
}

// Call is one of configMethods: {name, args}.
type Call struct {
	Name    string
	Args    []Value
	Pos     Pos // the name's
	ArgsPos Pos
}

// Stream is one of streams: a subscription of bolt To to a stream of From.
type Stream struct {
	Name     string // Flux's optional, unused name
	From, To string
	Grouping Grouping

	Pos, FromPos, ToPos Pos
}

// Grouping is a stream's grouping.
type Grouping struct {
	Type     string   // SHUFFLE, FIELDS, ALL, GLOBAL, NONE, DIRECT, LOCAL_OR_SHUFFLE
	Fields   []string // FIELDS' args
	StreamID string   // "" is the default stream

	Pos, TypePos, FieldsPos, StreamIDPos Pos
}

type include struct {
	file     string
	override bool
	pos      Pos // the file value's
}
