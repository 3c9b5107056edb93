package component

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gale-stream/gale/internal/editdist"
)

// ErrSpec wraps every error about a Spec's values: a missing constructor argument or
// required property, a value of the wrong type, or one that no code of the class read.
// It is the file's fault, not the program's.
var ErrSpec = errors.New("invalid spec")

// Spec is what a topology file gives one component: Flux's constructorArgs (Args, by
// position) and properties (by name). Values are as a YAML or JSON decoder gives them:
// string, int, float64, bool, nil, []any and map[string]any.
//
// Read it through the methods below, in the class's maker and Outputs: they name the
// position or key and the type wanted when a value does not fit, and Registry.Add
// reports any argument or property that none of them read (a misspelt property would
// otherwise silently leave its default, where Flux would find no setter and fail).
type Spec struct {
	Args       []any
	Properties map[string]any
	// Calls are Flux's configMethods, in file order: methods the class applies after
	// construction. Each Name must be one of the Declaration's Methods (Add refuses
	// others); the maker reads them with Method.
	Calls []Call
	// Dir is the directory the component's files are relative to: the topology
	// file's directory (gale run, gale serve --pipeline), or on a cluster the
	// unpacked --resources directory. A shell component runs its command there,
	// as Storm runs it in the jar's resources/. "" is the working directory.
	Dir string
	// Config is the topology file's config: section, key by key as the file
	// gives it (Storm hands every component the topology's conf): read-only,
	// and not subject to Add's check that every value is read.
	Config map[string]any
	// Cluster is the cluster the topology is built for, nil for a run in one
	// process (gale run): see Cluster.
	Cluster *Cluster
	// Inputs are the streams the bolt subscribes to, each with its declared fields,
	// as the file's streams give them (in file order): a class whose work depends
	// on its input's fields (an expression over them) checks it in its maker, at
	// build. The reader (package flux) fills it before the maker runs; nil for a
	// spout, and for a bolt in a cycle whose sources are not yet declared.
	Inputs []Input

	reads *reads // set by Registry.Add: what the class read, for the unread check
	call  int    // in a Spec that Method returned: 1 + the index of its call in Calls
	name  string // and the call's method name
}

// Input is one stream a bolt subscribes to: the component and stream (the default
// stream is "default") and the fields that stream declares.
type Input struct {
	Component string
	Stream    string
	Fields    []string
}

// NeedInputFields refuses, at property prop, a bolt one of whose input streams does
// not declare every one of names: a class that reads fields by name (a sink's
// columns, a count's key) checks them here, at build, so that a misspelt name is
// refused at its line rather than failing every tuple at runtime. Nothing is
// checked when the inputs are not known (Inputs nil: a topology built in Go, or a
// cycle).
func (s Spec) NeedInputFields(prop string, names ...string) error {
	list, _ := s.Properties[prop].([]any)
	for _, in := range s.Inputs {
		for _, n := range names {
			if slices.Contains(in.Fields, n) {
				continue
			}
			e := &SpecError{Arg: -1, Call: s.call - 1, Prop: prop, Msg: fmt.Sprintf(
				"property %s: %q is not a field of stream %q of %q, which this bolt reads (its fields: %s)",
				prop, n, in.Stream, in.Component, strings.Join(in.Fields, ", "))}
			if i := slices.Index(list, any(n)); i >= 0 {
				e.Path, e.At = []any{i}, 1 // at the element, in a list
			} else if v, _ := s.Properties[prop].(string); v == n {
				e.At = 1 // at the value
			}
			return e
		}
	}
	return nil
}

// Call is one of Flux's configMethods: a method name and its arguments (values as in
// Args: literals, or what a components: entry made, for a ref).
type Call struct {
	Name string
	Args []any
}

// reads records the arguments and properties a class read. It has a lock because a
// per-task factory may keep the Spec and read it from task goroutines.
type reads struct {
	mu      sync.Mutex
	args    map[int]bool
	props   map[string]bool
	fetched map[int]bool // calls that Method returned
	calls   []*reads     // each call's own reads of its arguments
}

func newReads() *reads {
	return &reads{args: map[int]bool{}, props: map[string]bool{}, fetched: map[int]bool{}}
}

func (s Spec) tracked() Spec {
	s.reads = newReads()
	for range s.Calls {
		s.reads.calls = append(s.reads.calls, newReads())
	}
	return s
}

// Method returns one Spec per call of method name in Calls, in file order, whose Args
// are the call's arguments: read them with ArgString, ArgInt... as constructor
// arguments. A class that declares Methods reads its calls here, in its maker; Add
// refuses a call that was never returned, or whose arguments were not all read.
func (s Spec) Method(name string) []Spec {
	var out []Spec
	for i, c := range s.Calls {
		if c.Name != name {
			continue
		}
		sub := Spec{Args: c.Args, call: i + 1, name: c.Name}
		if s.reads != nil {
			s.reads.mu.Lock()
			s.reads.fetched[i] = true
			sub.reads = s.reads.calls[i]
			s.reads.mu.Unlock()
		}
		out = append(out, sub)
	}
	return out
}

// SpecError is an ErrSpec error that says where in the Spec the problem is, so that a
// file's reader can point at the line of the value: an argument (Arg >= 0; of the call
// Calls[Call] when Call >= 0), a property (Prop != ""), a call (Call >= 0, Arg < 0),
// or the Spec as a whole (Arg < 0, Call < 0, Prop ""). It wraps ErrSpec.
//
// Path and At point inside the value, for a problem at one character of a string
// in it (an expression's syntax error): Path is the way from the argument or
// property's value to that string, map keys (string) and list positions (int),
// from the outside in (empty: the value itself is the string); At is 1 + the byte
// offset in the string of the character at fault, 0 when the string as a whole is.
type SpecError struct {
	Arg  int    // the argument's position, or -1
	Call int    // the call's position in Spec.Calls, or -1
	Prop string // the property's key, or ""
	Path []any  // within the value: keys and list positions to the string at fault
	At   int    // 1 + the byte offset in that string, or 0
	Msg  string // the problem, without the "invalid spec: " prefix
}

func (e *SpecError) Error() string { return ErrSpec.Error() + ": " + e.Msg }

// Unwrap returns ErrSpec.
func (e *SpecError) Unwrap() error { return ErrSpec }

func (s Spec) argError(i int, format string, a ...any) *SpecError {
	return &SpecError{Arg: i, Call: s.call - 1, Msg: s.argName(i) + fmt.Sprintf(format, a...)}
}

// argName is how errors name argument i: constructorArgs[i], or for a call's Spec
// configMethods[k] (name) args[i].
func (s Spec) argName(i int) string {
	if s.call > 0 {
		return fmt.Sprintf("configMethods[%d] (%s) args[%d]", s.call-1, s.name, i)
	}
	return fmt.Sprintf("constructorArgs[%d]", i)
}

func (s Spec) markArg(i int) {
	if s.reads != nil {
		s.reads.mu.Lock()
		s.reads.args[i] = true
		s.reads.mu.Unlock()
	}
}

func (s Spec) markProp(key string) {
	if s.reads != nil {
		s.reads.mu.Lock()
		s.reads.props[key] = true
		s.reads.mu.Unlock()
	}
}

// unread reports the arguments, properties and calls of a tracked Spec that nothing
// read, as one *SpecError placed at the first of them.
func (s Spec) unread() error {
	if s.reads == nil {
		return nil
	}
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	var first *SpecError
	var problems []string
	add := func(place SpecError, msg string) {
		if first == nil {
			place.Msg = ""
			first = &place
		}
		problems = append(problems, msg)
	}
	s.unreadArgs(s.reads, add)
	var known []string
	for k := range s.reads.props {
		known = append(known, k)
	}
	sort.Strings(known)
	var keys []string
	for k := range s.Properties {
		if !s.reads.props[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		msg := fmt.Sprintf("property %q is not used", k)
		if near := nearest(k, known); len(near) > 0 {
			msg += "; did you mean " + quoteOr(near) + "?"
		}
		if len(known) > 0 {
			msg += " (the class reads " + strings.Join(known, ", ") + ")"
		} else {
			msg += " (the class reads no properties)"
		}
		add(SpecError{Arg: -1, Call: -1, Prop: k}, msg)
	}
	for i, c := range s.Calls {
		if !s.reads.fetched[i] {
			add(SpecError{Arg: -1, Call: i}, fmt.Sprintf("configMethods[%d] (%s) is not applied: the class never read it", i, c.Name))
			continue
		}
		sub := Spec{Args: c.Args, call: i + 1, name: c.Name}
		r := s.reads.calls[i]
		r.mu.Lock()
		sub.unreadArgs(r, add)
		r.mu.Unlock()
	}
	if first == nil {
		return nil
	}
	first.Msg = strings.Join(problems, "; ")
	return first
}

func (s Spec) unreadArgs(r *reads, add func(SpecError, string)) {
	used := 0
	for i := range s.Args {
		if r.args[i] {
			used++
		}
	}
	for i, v := range s.Args {
		if !r.args[i] {
			add(SpecError{Arg: i, Call: s.call - 1}, fmt.Sprintf("%s (%s) is not used: the class read %d of %d", s.argName(i), describe(v), used, len(s.Args)))
		}
	}
}

// Arg returns constructor argument i as the file gave it.
func (s Spec) Arg(i int) (any, error) {
	if i < 0 {
		return nil, s.argError(i, ": a negative position (the class's code is wrong)")
	}
	s.markArg(i)
	if i >= len(s.Args) {
		return nil, s.argError(i, " is missing: the class takes at least %d, the file gives %d", i+1, len(s.Args))
	}
	return s.Args[i], nil
}

// ArgString returns constructor argument i, which must be a string.
func (s Spec) ArgString(i int) (string, error) { return arg(s, i, asString) }

// ArgInt returns constructor argument i, which must be an integer (an integral float,
// as JSON gives every number, is one).
func (s Spec) ArgInt(i int) (int, error) { return arg(s, i, asInt) }

// ArgFloat returns constructor argument i, which must be a number.
func (s Spec) ArgFloat(i int) (float64, error) { return arg(s, i, asFloat) }

// ArgBool returns constructor argument i, which must be true or false.
func (s Spec) ArgBool(i int) (bool, error) { return arg(s, i, asBool) }

// ArgStrings returns constructor argument i, which must be a list of strings (as
// Flux's shell components take their command line and output fields).
func (s Spec) ArgStrings(i int) ([]string, error) { return arg(s, i, asStrings) }

// Prop returns property key as the file gave it, and whether the file gave it. A
// class that passes free-form properties on (to a client's configuration) reads each
// key of Properties with Prop, so that Add counts them as read.
func (s Spec) Prop(key string) (any, bool) {
	s.markProp(key)
	v, ok := s.Properties[key]
	return v, ok
}

// Require reports the keys the file does not give, in one error. Properties are
// optional by default (Flux's are setters); this is for those a class cannot do
// without. It does not count as reading them.
func (s Spec) Require(keys ...string) error {
	var missing, hints []string
	for _, k := range keys {
		if _, ok := s.Properties[k]; !ok {
			missing = append(missing, fmt.Sprintf("%q", k))
			if m := s.misspelt(k, keys); m != "" {
				hints = append(hints, fmt.Sprintf("the file gives %q: is it %q misspelt?", m, k))
			}
		}
	}
	hint := ""
	if len(hints) > 0 {
		hint = " (" + strings.Join(hints, "; ") + ")"
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return &SpecError{Arg: -1, Call: s.call - 1, Msg: fmt.Sprintf("property %s is required%s", missing[0], hint)}
	}
	return &SpecError{Arg: -1, Call: s.call - 1, Msg: fmt.Sprintf("properties %s are required%s", strings.Join(missing, ", "), hint)}
}

// misspelt is a given property that looks like the missing key misspelt (one
// that is none of the keys required), for Require's error: a required property's
// typo would otherwise only say it is missing, as the class never reads the typo.
func (s Spec) misspelt(key string, required []string) string {
	best, dist := "", 3
	for k := range s.Properties {
		if slices.Contains(required, k) {
			continue
		}
		if d := editdist.Levenshtein(strings.ToLower(k), strings.ToLower(key)); d < dist || (d == dist && k < best) {
			best, dist = k, d
		}
	}
	return best
}

// String returns property key, which must be a string; def if the file does not give it.
func (s Spec) String(key, def string) (string, error) { return prop(s, key, def, asString) }

// Int returns property key, which must be an integer; def if the file does not give it.
func (s Spec) Int(key string, def int) (int, error) { return prop(s, key, def, asInt) }

// Float returns property key, which must be a number; def if the file does not give it.
func (s Spec) Float(key string, def float64) (float64, error) { return prop(s, key, def, asFloat) }

// Bool returns property key, which must be true or false; def if the file does not
// give it.
func (s Spec) Bool(key string, def bool) (bool, error) { return prop(s, key, def, asBool) }

// Strings returns property key, which must be a list of strings; def if the file does
// not give it.
func (s Spec) Strings(key string, def []string) ([]string, error) {
	return prop(s, key, def, asStrings)
}

// Duration returns property key, which must be a string such as "500ms" or "2m" (a
// bare number is refused: its unit would be a guess); def if the file does not give it.
func (s Spec) Duration(key string, def time.Duration) (time.Duration, error) {
	return prop(s, key, def, asDuration)
}

func arg[T any](s Spec, i int, conv func(any) (T, string, error)) (T, error) {
	var zero T
	v, err := s.Arg(i)
	if err != nil {
		return zero, err
	}
	t, want, err := conv(v)
	if err != nil {
		return zero, s.argError(i, ": want %s, got %v", want, err)
	}
	return t, nil
}

func prop[T any](s Spec, key string, def T, conv func(any) (T, string, error)) (T, error) {
	v, ok := s.Prop(key)
	if !ok {
		return def, nil
	}
	t, want, err := conv(v)
	if err != nil {
		var zero T
		return zero, &SpecError{Arg: -1, Call: -1, Prop: key, Msg: fmt.Sprintf("property %q: want %s, got %v", key, want, err)}
	}
	return t, nil
}

// ArgOf returns constructor argument i, which must be a T: for a value that a
// components: entry made (a ref), or any type a decoder does not give.
func ArgOf[T any](s Spec, i int) (T, error) { return arg(s, i, asT[T]) }

// PropOf returns property key, which must be a T (a ref's value, typically); def if
// the file does not give it.
func PropOf[T any](s Spec, key string, def T) (T, error) { return prop(s, key, def, asT[T]) }

func asT[T any](v any) (T, string, error) {
	want := "a " + reflect.TypeFor[T]().String()
	if t, ok := v.(T); ok {
		return t, want, nil
	}
	var zero T
	return zero, want, got(v)
}

// Each conversion returns the value, what it wants (for the error), and an error
// describing what it got instead.

func asString(v any) (string, string, error) {
	const want = "a string"
	if s, ok := v.(string); ok {
		return s, want, nil
	}
	return "", want, got(v)
}

func asInt(v any) (int, string, error) {
	const want = "an integer"
	switch n := v.(type) {
	case int:
		return n, want, nil
	case int8:
		return int(n), want, nil
	case int16:
		return int(n), want, nil
	case int32:
		return int(n), want, nil
	case int64:
		if n >= math.MinInt && n <= math.MaxInt {
			return int(n), want, nil
		}
	case uint:
		if uint64(n) <= math.MaxInt {
			return int(n), want, nil
		}
	case uint8:
		return int(n), want, nil
	case uint16:
		return int(n), want, nil
	case uint32:
		if uint64(n) <= math.MaxInt {
			return int(n), want, nil
		}
	case uint64:
		if n <= math.MaxInt {
			return int(n), want, nil
		}
	case float32:
		return asInt(float64(n))
	case float64:
		// JSON makes every number a float64: 3.0 is the integer 3, 3.5 is not one.
		if n == math.Trunc(n) && n >= math.MinInt && n < math.MaxInt {
			return int(n), want, nil
		}
	}
	return 0, want, got(v)
}

func asFloat(v any) (float64, string, error) {
	const want = "a number"
	switch n := v.(type) {
	case float64:
		return n, want, nil
	case float32:
		return float64(n), want, nil
	case string, bool, nil:
	default:
		if i, _, err := asInt(v); err == nil {
			return float64(i), want, nil
		}
	}
	return 0, want, got(v)
}

func asBool(v any) (bool, string, error) {
	const want = "true or false"
	if b, ok := v.(bool); ok {
		return b, want, nil
	}
	return false, want, got(v)
}

func asStrings(v any) ([]string, string, error) {
	const want = "a list of strings"
	switch l := v.(type) {
	case []string:
		return slices.Clone(l), want, nil
	case []any:
		out := make([]string, len(l))
		for i, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, want, fmt.Errorf("a list whose element %d is %w", i, got(e))
			}
			out[i] = s
		}
		return out, want, nil
	}
	return nil, want, got(v)
}

func asDuration(v any) (time.Duration, string, error) {
	const want = `a duration such as "500ms" or "2m"`
	switch d := v.(type) {
	case time.Duration:
		return d, want, nil
	case string:
		if p, err := time.ParseDuration(d); err == nil {
			return p, want, nil
		}
	}
	return 0, want, got(v)
}

// got describes a value that did not fit, for an error.
func got(v any) error { return errors.New(describe(v)) }

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", x)
	case bool:
		return fmt.Sprintf("bool %t", x)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return fmt.Sprintf("integer %d", x)
	case float32, float64:
		return fmt.Sprintf("number %v", x)
	case []any:
		return fmt.Sprintf("a list of %d", len(x))
	case map[string]any:
		return fmt.Sprintf("a map of %d", len(x))
	}
	return fmt.Sprintf("%T %v", v, v)
}
