package component

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gale-stream/gale/internal/editdist"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

var (
	// ErrRegister wraps every error of Register: the program declared a class wrongly.
	ErrRegister = errors.New("invalid declaration")
	// ErrUnknownClass: a file names a class the binary did not register.
	ErrUnknownClass = errors.New("unknown class")
)

// Declaration declares one class. Exactly one of Spout, Bolt, BasicBolt and Value is
// set.
//
// The maker runs once per component, when the topology is built: it reads and checks
// the Spec and returns the factory that builds each task's instance. So a bad file
// fails at build, naming the component and class, before any task starts.
type Declaration struct {
	Class string // what a file's className says, e.g. "wordlen.Split"; no spaces
	Doc   string // one line, shown by listings

	Spout     func(Spec) (func() topology.Spout, error)
	Bolt      func(Spec) (func() topology.Bolt, error)
	BasicBolt func(Spec) (func() topology.BasicBolt, error)
	// Value makes a value that spouts and bolts receive, where a file says ref (Flux's
	// components: a connection's settings, a scheme, a shared client). Make runs it
	// once per components: entry; the value is passed as it is, read with ArgOf or
	// PropOf.
	Value func(Spec) (any, error)

	// Methods are the configMethods a file may call on the class (Flux calls such
	// methods by reflection after construction); the maker reads the calls with
	// Spec.Method. A call to another name is refused, naming these.
	Methods []string

	// Outputs are the streams the class emits given its Spec (Storm's
	// declareOutputFields); nil declares none (a sink bolt). A function of the Spec,
	// because some classes take their output fields from the file (Flux's shell bolts).
	Outputs func(Spec) ([]Output, error)

	// TickEvery, if > 0, delivers a tick tuple to each of the bolt's tasks at this
	// interval (Storm's topology.tick.tuple.freq.secs for the component): a bolt
	// that holds tuples, as a batching sink does, flushes on it.
	TickEvery time.Duration
}

// Output is one stream a class emits.
type Output struct {
	Stream string   // "" is the default stream
	Fields []string // the names of its values, in order
	Direct bool     // emitted with EmitDirect only, consumed with direct grouping only
}

// Kind is what a class is: a spout, a bolt or a basic (auto-acking) bolt. A file's
// reader checks it against the section the component is in (Flux's spouts or bolts).
type Kind int

// The kinds; the zero Kind is a declaration that sets none of the three.
const (
	SpoutKind Kind = iota + 1
	BoltKind
	BasicBoltKind
	ValueKind // a components: entry, referenced by ref
)

func (k Kind) String() string {
	switch k {
	case SpoutKind:
		return "spout"
	case BoltKind:
		return "bolt"
	case BasicBoltKind:
		return "basic bolt"
	case ValueKind:
		return "value"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Kind returns which of Spout, Bolt and BasicBolt is set; 0 if not exactly one is.
func (d Declaration) Kind() Kind {
	var k Kind
	n := 0
	if d.Spout != nil {
		k, n = SpoutKind, n+1
	}
	if d.Bolt != nil {
		k, n = BoltKind, n+1
	}
	if d.BasicBolt != nil {
		k, n = BasicBoltKind, n+1
	}
	if d.Value != nil {
		k, n = ValueKind, n+1
	}
	if n != 1 {
		return 0
	}
	return k
}

// Registry holds the classes a binary offers to topology files. The zero value is
// empty and ready; it is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	classes map[string]Declaration
}

// Register declares a class. It refuses, naming the class, an empty class, one not
// in UTF-8 or with a space or control character, a Doc of more than one line or
// with another control character (a tab), a declaration that sets
// none or more than one of Spout, Bolt and BasicBolt, and a class registered before
// (the first stays): each error wraps ErrRegister.
func (r *Registry) Register(d Declaration) error {
	if err := check(d); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.classes[d.Class]; ok {
		return fmt.Errorf("class %q: %w: registered twice (first as a %s: %q)", d.Class, ErrRegister, prev.Kind(), prev.Doc)
	}
	if r.classes == nil {
		r.classes = map[string]Declaration{}
	}
	r.classes[d.Class] = d
	return nil
}

func check(d Declaration) error {
	if d.Class == "" {
		return fmt.Errorf("%w: empty class name (doc %q)", ErrRegister, d.Doc)
	}
	if !utf8.ValidString(d.Class) {
		// A file (YAML, UTF-8) could never name it.
		return fmt.Errorf("class %q: %w: not valid UTF-8", d.Class, ErrRegister)
	}
	for i, c := range d.Class {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			// A file's className is one word: such a class could never be named.
			return fmt.Errorf("class %q: %w: %q at byte %d (a class name has no spaces)", d.Class, ErrRegister, c, i)
		}
	}
	if strings.ContainsAny(d.Doc, "\r\n") {
		return fmt.Errorf("class %q: %w: doc has a line break (listings show it on one line)", d.Class, ErrRegister)
	}
	if i := strings.IndexFunc(d.Doc, unicode.IsControl); i >= 0 {
		// A tab splits gale components' columns; an escape rewrites the terminal.
		return fmt.Errorf("class %q: %w: doc has control character %q at byte %d (listings show it as one column)", d.Class, ErrRegister, d.Doc[i:i+1], i)
	}
	var set []string
	if d.Spout != nil {
		set = append(set, "Spout")
	}
	if d.Bolt != nil {
		set = append(set, "Bolt")
	}
	if d.BasicBolt != nil {
		set = append(set, "BasicBolt")
	}
	if d.Value != nil {
		set = append(set, "Value")
	}
	switch len(set) {
	case 0:
		return fmt.Errorf("class %q: %w: none of Spout, Bolt, BasicBolt and Value is set", d.Class, ErrRegister)
	case 1:
	default:
		return fmt.Errorf("class %q: %w: %s are set; set exactly one", d.Class, ErrRegister, strings.Join(set, " and "))
	}
	if d.Value != nil && d.Outputs != nil {
		return fmt.Errorf("class %q: %w: a Value class has no Outputs (it is no spout or bolt)", d.Class, ErrRegister)
	}
	seen := map[string]bool{}
	for _, m := range d.Methods {
		if m == "" || seen[m] {
			return fmt.Errorf("class %q: %w: method %q is empty or listed twice", d.Class, ErrRegister, m)
		}
		seen[m] = true
	}
	return nil
}

// Lookup returns the declaration of class. An unknown class is an error wrapping
// ErrUnknownClass that suggests near misses and lists the registered classes.
func (r *Registry) Lookup(class string) (Declaration, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if d, ok := r.classes[class]; ok {
		return d, nil
	}
	if len(r.classes) == 0 {
		return Declaration{}, fmt.Errorf("%w %q: no class is registered", ErrUnknownClass, class)
	}
	names := make([]string, 0, len(r.classes))
	for c := range r.classes {
		names = append(names, c)
	}
	sort.Strings(names)
	msg := fmt.Sprintf("%q", class)
	if near := nearest(class, names); len(near) > 0 {
		msg += "; did you mean " + quoteOr(near) + "?"
	}
	return Declaration{}, fmt.Errorf("%w %s (registered: %s)", ErrUnknownClass, msg, strings.Join(names, ", "))
}

// Classes returns every declaration, sorted by class.
func (r *Registry) Classes() []Declaration {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Declaration, 0, len(r.classes))
	for _, d := range r.classes {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out
}

// Add declares component id of class on b: it runs the class's maker and Outputs on
// spec, checks that they read every argument and property of spec, and declares the
// component with its outputs. It returns the Declarer, for the caller to add the
// bolt's groupings.
//
// Every error names id and class, and leaves b untouched: an unknown class (wrapping
// ErrUnknownClass), an error the maker or Outputs returned (wrapped as it is, so
// ErrSpec from a Spec method still matches), a panic in either, a nil factory, a
// stream declared twice, a reserved stream id or a bad field name, an argument or
// property nothing read (wrapping ErrSpec). The id and parallelism are checked by b's
// Build, as for any component.
func (r *Registry) Add(b *topology.Builder, id, class string, spec Spec, parallelism int) (*topology.Declarer, error) {
	d, _, err := r.Declare(b, id, class, spec, parallelism)
	return d, err
}

// Declare is Add that also returns the streams the component declared (default
// stream as "default"), for a file's reader to check its streams' groupings against
// them, with positions, before the builder does. A class with none is a sink.
func (r *Registry) Declare(b *topology.Builder, id, class string, spec Spec, parallelism int) (*topology.Declarer, []Output, error) {
	dec, outs, err := r.declare(b, id, class, spec, parallelism)
	if err != nil {
		return nil, nil, err
	}
	return dec, outs, nil
}

func (r *Registry) declare(b *topology.Builder, id, class string, spec Spec, parallelism int) (*topology.Declarer, []Output, error) {
	if b == nil {
		return nil, nil, fmt.Errorf("component %q (class %q): nil builder", id, class)
	}
	p, err := r.Prepare(id, class, spec)
	if err != nil {
		return nil, nil, err
	}
	return p.Declare(b, parallelism), p.Outputs(), nil
}

// Prepared is a component whose class's maker and Outputs ran (Prepare), not yet
// declared on a builder.
type Prepared struct {
	id    string
	spout func() topology.Spout
	bolt  func() topology.Bolt
	basic func() topology.BasicBolt
	outs  []Output
	tick  time.Duration
}

// Prepare is the first half of Declare: it runs the maker and Outputs of class on
// spec, with Declare's checks and errors, and declares nothing. A file's reader
// prepares each bolt after the components it reads (so that Spec.Inputs holds their
// fields) and declares them in file order, which numbers the tasks.
func (r *Registry) Prepare(id, class string, spec Spec) (*Prepared, error) {
	d, err := r.Lookup(class)
	if err != nil {
		return nil, fmt.Errorf("component %q: %w", id, err)
	}
	wrap := func(err error) error { return fmt.Errorf("component %q (class %q): %w", id, class, err) }
	if d.Kind() == ValueKind {
		return nil, wrap(fmt.Errorf("a value class (a components: entry, used by ref), not a spout or bolt"))
	}
	if err := d.CheckCalls(spec.Calls); err != nil {
		return nil, wrap(err)
	}
	spec = spec.tracked()
	p := &Prepared{id: id}
	switch d.Kind() {
	case SpoutKind:
		p.spout, err = runMaker(d.Kind(), d.Spout, spec)
	case BoltKind:
		p.bolt, err = runMaker(d.Kind(), d.Bolt, spec)
	case BasicBoltKind:
		p.basic, err = runMaker(d.Kind(), d.BasicBolt, spec)
	}
	if err != nil {
		return nil, wrap(err)
	}
	if d.Outputs != nil {
		if p.outs, err = outputs(d.Outputs, spec); err != nil {
			return nil, wrap(err)
		}
	}
	if err := spec.unread(); err != nil {
		return nil, wrap(err)
	}
	if d.TickEvery > 0 && p.spout == nil {
		p.tick = d.TickEvery
	}
	return p, nil
}

// Outputs are the streams the component declares (default stream as "default").
func (p *Prepared) Outputs() []Output { return slices.Clone(p.outs) }

// Declare declares the component on b with its outputs and returns the Declarer,
// for the caller to add the bolt's groupings.
func (p *Prepared) Declare(b *topology.Builder, parallelism int) *topology.Declarer {
	var dec *topology.Declarer
	switch {
	case p.spout != nil:
		dec = b.SetSpout(p.id, p.spout, parallelism)
	case p.bolt != nil:
		dec = b.SetBolt(p.id, p.bolt, parallelism)
	default:
		dec = b.SetBasicBolt(p.id, p.basic, parallelism)
	}
	for _, o := range p.outs {
		if o.Direct {
			dec.DirectStream(o.Stream, o.Fields...)
		} else {
			dec.OutputStream(o.Stream, o.Fields...)
		}
	}
	if p.tick > 0 {
		dec.TickEvery(p.tick)
	}
	return dec
}

// Make makes the value of a components: entry of class (a Value class) from spec,
// with the checks of Add: an unknown class, a class that is no Value class, an error
// or panic of the maker, a call the class does not declare, a value nothing read.
// Errors name id and class.
func (r *Registry) Make(id, class string, spec Spec) (v any, err error) {
	d, err := r.Lookup(class)
	if err != nil {
		return nil, fmt.Errorf("component %q: %w", id, err)
	}
	wrap := func(err error) error { return fmt.Errorf("component %q (class %q): %w", id, class, err) }
	if d.Kind() != ValueKind {
		return nil, wrap(fmt.Errorf("a %s class, not a value class: a components: entry needs a class that declares Value", d.Kind()))
	}
	if err := d.CheckCalls(spec.Calls); err != nil {
		return nil, wrap(err)
	}
	spec = spec.tracked()
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("value maker panicked: %v", p)
			}
		}()
		v, err = d.Value(spec)
	}()
	if err != nil {
		return nil, wrap(err)
	}
	if err := spec.unread(); err != nil {
		return nil, wrap(err)
	}
	return v, nil
}

// CheckCalls refuses, as a *SpecError placed at the call, a call to a method the
// class does not declare in Methods.
func (d Declaration) CheckCalls(calls []Call) error {
	for i, c := range calls {
		if slices.Contains(d.Methods, c.Name) {
			continue
		}
		msg := fmt.Sprintf("configMethods[%d]: the class has no method %q", i, c.Name)
		if len(d.Methods) == 0 {
			msg += " (it declares no configMethods)"
		} else {
			if near := nearest(c.Name, d.Methods); len(near) > 0 {
				msg += "; did you mean " + quoteOr(near) + "?"
			}
			msg += " (it declares " + strings.Join(d.Methods, ", ") + ")"
		}
		return &SpecError{Arg: -1, Call: i, Msg: msg}
	}
	return nil
}

// factory is what a maker returns.
type factory interface {
	func() topology.Spout | func() topology.Bolt | func() topology.BasicBolt
}

// runMaker runs a maker, turning a panic or a nil factory into an error.
func runMaker[F factory](k Kind, maker func(Spec) (F, error), spec Spec) (f F, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s maker panicked: %v", k, p)
		}
	}()
	if f, err = maker(spec); err == nil && f == nil {
		err = fmt.Errorf("%s maker returned a nil factory and no error", k)
	}
	return f, err
}

// outputs runs Outputs and checks what the builder would only report at Build, so
// that the error names the class whose code (or spec) made the streams.
func outputs(fn func(Spec) ([]Output, error), spec Spec) (outs []Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			outs, err = nil, fmt.Errorf("Outputs panicked: %v", p)
		}
	}()
	if outs, err = fn(spec); err != nil {
		return nil, fmt.Errorf("Outputs: %w", err)
	}
	outs = append([]Output(nil), outs...)
	seen := map[string]bool{}
	for i := range outs {
		o := &outs[i]
		if o.Stream == "" {
			o.Stream = tuple.DefaultStream
		}
		if seen[o.Stream] {
			return nil, fmt.Errorf("Outputs: stream %q declared twice", o.Stream)
		}
		seen[o.Stream] = true
		if strings.HasPrefix(o.Stream, "__") {
			return nil, fmt.Errorf("Outputs: stream id %q is reserved (ids starting with __ are system ids)", o.Stream)
		}
		if err := tuple.NewFields(o.Fields...).Validate(); err != nil {
			return nil, fmt.Errorf("Outputs: stream %q: %w", o.Stream, err)
		}
		o.Fields = append([]string(nil), o.Fields...)
	}
	return outs, nil
}

// nearest returns the names closest to a miss: equal but for case, equal in the last
// dotted part ("SplitSentence" for "com.example.SplitSentence"), or a few edits away.
func nearest(miss string, names []string) []string {
	best, out := -1, []string(nil)
	lower := strings.ToLower(miss)
	for _, n := range names {
		ln := strings.ToLower(n)
		score := -1
		switch {
		case ln == lower:
			score = 0
		case lastPart(ln) != "" && lastPart(ln) == lastPart(lower):
			score = 1
		default:
			if d := editdist.Levenshtein(lower, ln); d <= 2+len(miss)/10 {
				score = 1 + d
			}
		}
		if score < 0 {
			continue
		}
		switch {
		case best < 0 || score < best:
			best, out = score, []string{n}
		case score == best:
			out = append(out, n)
		}
	}
	return out
}

func lastPart(s string) string { return s[strings.LastIndexAny(s, "./")+1:] }

// quoteOr is `"a"`, `"a" or "b"`, `"a", "b" or "c"`.
func quoteOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
