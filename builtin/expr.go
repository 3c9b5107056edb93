package builtin

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	exprbuiltin "github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/tuple"
)

// The expression bolts use expr (github.com/expr-lang/expr): pure Go, compiled
// once to a program for its bytecode VM, type-checked against the names it may
// use (the input's fields), with the built-ins a tuple needs (fromJSON, string
// and number functions, let, ?:, ??). docs/components.md says why expr, not CEL.

var (
	// ErrExpression wraps every error about an expression: its syntax, a name that
	// is no field of the input, a result of the wrong type.
	ErrExpression = errors.New("invalid expression")
	// ErrExprOption wraps the other errors of NewFilterBolt, NewMapBolt and NewKeyBolt: input
	// fields or output names empty or twice, a key field of the input's, a bad
	// WithFunction.
	ErrExprOption = errors.New("invalid expression bolt option")
)

// ExprError is an expression refused when it is compiled: Offset is the byte in
// Expr at fault (0 when the expression as a whole is, as for a filter's result
// that is not a bool). It wraps ErrExpression.
type ExprError struct {
	Expr   string
	Offset int
	Msg    string
}

func (e *ExprError) Error() string {
	line, col := exprLineCol(e.Expr, e.Offset)
	return fmt.Sprintf("%v %q at %d:%d: %s", ErrExpression, e.Expr, line, col, e.Msg)
}

// Unwrap returns ErrExpression.
func (e *ExprError) Unwrap() error { return ErrExpression }

// exprLineCol is the 1-based line and column (in characters) of byte off of s.
func exprLineCol(s string, off int) (int, int) {
	off = min(max(off, 0), len(s))
	line := 1 + strings.Count(s[:off], "\n")
	start := strings.LastIndexByte(s[:off], '\n') + 1
	return line, 1 + utf8.RuneCountInString(s[start:off])
}

// ExprOption changes how an expression bolt is made.
type ExprOption func(*exprOptions) error

type exprOptions struct {
	keyField string
	funcs    []expr.Option
	names    []string // the functions' names, to refuse one twice
}

// WithKeyField names the field Key adds (default "key"); it must not be a field of
// the input.
func WithKeyField(name string) ExprOption {
	return func(o *exprOptions) error {
		if err := tuple.NewFields(name).Validate(); err != nil {
			return fmt.Errorf("%w: key field: %w", ErrExprOption, err)
		}
		o.keyField = name
		return nil
	}
}

// WithFunction makes a Go function callable from the expressions by name
// (expr.Function): types, if given, are its signatures, checked at compile.
func WithFunction(name string, fn func(params ...any) (any, error), types ...any) ExprOption {
	return func(o *exprOptions) error {
		if name == "" || fn == nil {
			return fmt.Errorf("%w: function %q: want a name and a function", ErrExprOption, name)
		}
		if slices.Contains(o.names, name) {
			return fmt.Errorf("%w: function %q given twice", ErrExprOption, name)
		}
		o.names = append(o.names, name)
		o.funcs = append(o.funcs, expr.Function(name, fn, types...))
		return nil
	}
}

func exprOptionsOf(opts []ExprOption) (*exprOptions, error) {
	o := &exprOptions{keyField: "key"}
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// exprProgram is one compiled expression over an input of fields.
type exprProgram struct {
	source string
	prog   *vm.Program
	used   []string // the input's fields it reads, in first-use order
	// field is the input field the expression is, when it is just one (a Map's
	// "order: order"): its value is taken as it is, without running the VM.
	field string
	// env: it names $env, whose value is the variables' map itself, which its
	// result may hold.
	env bool
}

// exprCompile compiles source over fields (each an expression variable of any type):
// a name that is no field, a syntax error, or (asBool) a result that cannot be a
// bool is an *ExprError at its character.
func exprCompile(source string, fields []string, asBool bool, o *exprOptions) (*exprProgram, error) {
	if strings.TrimSpace(source) == "" {
		return nil, &ExprError{Expr: source, Msg: "empty"}
	}
	env := types.Map{}
	for _, f := range fields {
		env[f] = types.Any
	}
	opts := append([]expr.Option{expr.Env(env), exprRepeat}, o.funcs...)
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	prog, err := expr.Compile(source, opts...)
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, &ExprError{Expr: source, Offset: exprByteOffset(source, fe.From), Msg: fe.Message + exprKnown(fe.Message, fields)}
		}
		return nil, &ExprError{Expr: source, Msg: err.Error()}
	}
	p := &exprProgram{source: source, prog: prog}
	v := &exprIdents{fields: fields, funcs: o.names}
	node := prog.Node()
	ast.Walk(&node, v)
	if v.called != nil {
		// A field is a variable of any type, so expr accepts a call of it, which
		// then fails on every input: no tuple value is a function. A field named
		// as one of expr's functions (len, date, type, upper...) hides it.
		name := v.called.Value
		msg := fmt.Sprintf("%s is a field of the input, not a function: calling it fails on every input", name)
		if _, ok := exprbuiltin.Index[name]; ok {
			msg += fmt.Sprintf(" (the field hides the function %s: give the field another name where it is declared)", name)
		}
		return nil, &ExprError{Expr: source, Offset: exprByteOffset(source, v.called.Location().From), Msg: msg}
	}
	p.used, p.env = v.used, v.env
	if id, ok := node.(*ast.IdentifierNode); ok && slices.Contains(fields, id.Value) {
		p.field = id.Value
	}
	return p, nil
}

// exprRepeat replaces expr's repeat, which makes its string before it checks the
// size against the memory budget: repeat(field, 1000000) over a field of 10 kB
// allocated 10 GB, enough to kill the worker, before failing the input. This one
// checks first, at expr's limit (1e6 bytes; what the budget refuses after anyway).
var exprRepeat = expr.Function("repeat", func(params ...any) (any, error) {
	s, ok := params[0].(string)
	if !ok {
		return nil, fmt.Errorf("repeat: want a string, got %T", params[0])
	}
	var n int
	switch x := params[1].(type) {
	case int:
		n = x
	case int64:
		n = int(x)
	case int32:
		n = int(x)
	case uint64:
		n = int(min(x, uint64(math.MaxInt)))
	case float64:
		n = int(x)
	default:
		return nil, fmt.Errorf("repeat: want a count, got %T", params[1])
	}
	if n < 0 {
		return nil, fmt.Errorf("invalid argument for repeat (expected positive integer, got %d)", n)
	}
	if n > 0 && len(s) > exprMaxRepeat/n {
		return nil, fmt.Errorf("memory budget exceeded: repeat of %d bytes %d times", len(s), n)
	}
	return strings.Repeat(s, n), nil
}, new(func(string, int) string))

const exprMaxRepeat = 1e6

// exprKnown adds the fields to an "unknown name" message: what the expression may use.
func exprKnown(msg string, fields []string) string {
	if !strings.HasPrefix(msg, "unknown name") {
		return ""
	}
	if len(fields) == 0 {
		return " (the input has no fields)"
	}
	return " (the input's fields: " + strings.Join(fields, ", ") + ")"
}

// exprByteOffset is the byte offset of rune index r of s (expr counts in runes).
func exprByteOffset(s string, r int) int {
	i := 0
	for off := range s {
		if i == r {
			return off
		}
		i++
	}
	return len(s)
}

// exprIdents collects the input fields an expression names.
type exprIdents struct {
	fields []string
	funcs  []string // WithFunction's: a call of one is not of a field
	used   []string
	env    bool                // $env is named
	called *ast.IdentifierNode // the first field called as a function
}

func (v *exprIdents) Visit(n *ast.Node) {
	if c, ok := (*n).(*ast.CallNode); ok && v.called == nil {
		if id, ok := c.Callee.(*ast.IdentifierNode); ok && slices.Contains(v.fields, id.Value) && !slices.Contains(v.funcs, id.Value) {
			v.called = id
		}
	}
	id, ok := (*n).(*ast.IdentifierNode)
	switch {
	case !ok:
	case id.Value == "$env": // $env.quantity, $env["quantity"]: any field
		v.env = true
		for _, f := range v.fields {
			if !slices.Contains(v.used, f) {
				v.used = append(v.used, f)
			}
		}
	case slices.Contains(v.fields, id.Value) && !slices.Contains(v.used, id.Value):
		v.used = append(v.used, id.Value)
	}
}

// exprEnv is one task's evaluation state: the variables' map and the VM, reused
// for every tuple (an expression runs on the task's goroutine only), and where
// the fields its expressions read are in the input's values.
type exprEnv struct {
	progs   []*exprProgram
	slot    []int // slot[i]: for progs[i] that is one field, its index in used; else -1
	vars    map[string]any
	vm      vm.VM
	used    []string      // the fields any of the task's expressions read
	inVars  []bool        // inVars[k]: used[k] is read by the VM (set in vars)
	fields  *tuple.Fields // the input fields idx was computed for
	idx     []int         // idx[k]: the position of used[k] in fields
	missing string        // a used field the input lacks ("" if none)
	// pass: the fields a Filter or Key was made for, which it emits its input's
	// values under: an input of other fields (or in another order) is refused, not
	// passed on with its values under the wrong names. nil for a Map.
	pass  []string
	other bool         // the input's fields are not pass
	vals  tuple.Values // the current input's values
	// fresh: an expression names $env, so the variables' map may be in what it
	// emits: each input gets a map of its own, not the task's reused one.
	fresh bool
	buf   []byte // to encode a result, checking it can travel (carriable)
}

func newExprEnv(progs ...*exprProgram) *exprEnv {
	e := &exprEnv{progs: progs, vars: map[string]any{}}
	slot := func(f string) int {
		k := slices.Index(e.used, f)
		if k < 0 {
			e.used, e.inVars = append(e.used, f), append(e.inVars, false)
			k = len(e.used) - 1
		}
		return k
	}
	for _, p := range progs {
		e.fresh = e.fresh || p.env
		if p.field != "" {
			e.slot = append(e.slot, slot(p.field))
			continue
		}
		e.slot = append(e.slot, -1)
		for _, u := range p.used {
			e.inVars[slot(u)] = true
		}
	}
	return e
}

// load sets the variables from t's values. A []byte value is seen as a string
// (the expression language has no bytes; the log spout's payload is bytes): an
// expression reads fromJSON(payload). It returns an error when t lacks a field.
// Only what the VM reads goes in the map: a map write is much of what an
// expression costs over Go.
func (e *exprEnv) load(t *tuple.Tuple) error {
	if f := t.Fields(); f != e.fields {
		e.fields, e.missing = f, ""
		e.other = e.pass != nil && !slices.Equal(f.Names(), e.pass)
		e.idx = e.idx[:0]
		for _, u := range e.used {
			i := f.Index(u)
			if i < 0 && e.missing == "" {
				e.missing = u
			}
			e.idx = append(e.idx, i)
		}
	}
	if e.other {
		return fmt.Errorf("the input from %s has fields %v, the bolt was made for %v: it would emit the values under the wrong names", t.SourceComponent(), e.fields.Names(), e.pass)
	}
	if e.missing != "" {
		return fmt.Errorf("the input from %s has no field %q (its fields: %v)", t.SourceComponent(), e.missing, t.Fields())
	}
	e.vals = t.Values()
	if e.fresh {
		e.vars = make(map[string]any, len(e.used))
	}
	for k, u := range e.used {
		if !e.inVars[k] {
			continue
		}
		v := e.vals[e.idx[k]]
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		e.vars[u] = v
	}
	return nil
}

// run evaluates progs[i] on the loaded input.
func (e *exprEnv) run(i int) (any, error) {
	if k := e.slot[i]; k >= 0 {
		v := e.vals[e.idx[k]]
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		return v, nil
	}
	return e.vm.Run(e.progs[i].prog, e.vars)
}

// carriable returns an error if v, an expression's result a Map or Key emits, is a
// value no tuple can carry between workers: expr makes some (duration() is a
// time.Duration, groupBy a map of any keys, toPairs arrays). Caught here, the input
// fails with the expression and the type, on one worker as on many; past the emit,
// a cluster's transport refuses it at send and the tree is lost until it times out.
// Scalars, the common case, are not encoded.
func (e *exprEnv) carriable(v any) error {
	switch v.(type) {
	case nil, string, bool, int, int64, float64, []byte, time.Time, int8, int16, int32, uint, uint8, uint16, uint32, uint64, float32:
		return nil
	}
	var err error
	e.buf, err = codec.AppendValue(e.buf[:0], v)
	if cap(e.buf) > 64<<10 {
		e.buf = nil
	}
	if err != nil {
		return fmt.Errorf("its result cannot travel in a tuple: %w", err)
	}
	return nil
}

// describeVars says what the fields p reads held, for a failure's reason: the
// values at fault.
func (e *exprEnv) describeVars(p *exprProgram) string {
	var parts []string
	for _, u := range p.used {
		v := e.vals[e.idx[slices.Index(e.used, u)]]
		if b, ok := v.([]byte); ok {
			v = string(b) // as the expression saw it
		}
		s := fmt.Sprintf("%v", v)
		if len(s) > 80 {
			cut := 77
			for cut > 0 && !utf8.RuneStart(s[cut]) { // not inside a character
				cut--
			}
			s = s[:cut] + "..."
		}
		if _, ok := v.(string); ok {
			s = fmt.Sprintf("%q", s)
		}
		if v == nil {
			parts = append(parts, u+" = nil") // not "<nil> <nil>"
			continue
		}
		parts = append(parts, fmt.Sprintf("%s = %T %s", u, v, s))
	}
	if len(parts) == 0 {
		return "no field read"
	}
	return strings.Join(parts, ", ")
}

// runError is the reason a tuple fails: the class, the expression and the values
// it read (the engine adds the component: bolt "id": ...).
func (e *exprEnv) runError(class string, p *exprProgram, err error) error {
	msg := err.Error()
	var fe *file.Error
	if errors.As(err, &fe) {
		msg = fe.Message
	}
	return fmt.Errorf("%s: expression %q: %s (%s)", class, p.source, msg, e.describeVars(p))
}
