package flux

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Error is a refusal of a file: "FILE:LINE:COL: msg". Load, Parse, Build and
// BuildPipeline return an *Error, or errors.Join of several (each an *Error), so that
// a caller lists every problem at once.
type Error struct {
	File      string
	Line, Col int
	Msg       string
	// Err is the cause when it is one a caller may test with errors.Is (ErrMultilang,
	// component.ErrUnknownClass, component.ErrSpec...); nil otherwise. Msg already
	// says it.
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg) }

// Unwrap returns Err.
func (e *Error) Unwrap() error { return e.Err }

// ErrMultilang is the cause of the refusal of Storm's shell components
// (ShellSpoutClass, ShellBoltClass) while the binary registers no class under their
// names: gale does not run multilang subprocesses yet. The multilang work registers
// its spout and bolt under these two class names (component.Registry.Register); from
// then on a file's shell components build like any other class.
var ErrMultilang = errors.New("multilang is not built yet")

// The class names of Storm's shell wrappers, as a Flux file writes them:
// constructorArgs [[command, args...], [output fields...]].
const (
	ShellSpoutClass = "org.apache.storm.flux.wrappers.spouts.FluxShellSpout"
	ShellBoltClass  = "org.apache.storm.flux.wrappers.bolts.FluxShellBolt"
)

// Pos is where a value is in a file: its name, 1-based line and column.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

func (p Pos) errorf(format string, a ...any) *Error {
	return &Error{File: p.File, Line: p.Line, Col: p.Col, Msg: fmt.Sprintf(format, a...)}
}

// errs collects refusals in the order found.
type errs []error

func (e *errs) at(p Pos, format string, a ...any) { *e = append(*e, p.errorf(format, a...)) }

// err is nil, the one error, or all joined, in order of file (as first met), line
// and column.
func (e errs) err() error {
	if len(e) == 0 {
		return nil
	}
	files := map[string]int{}
	at := func(x error) (int, int, int) {
		var fe *Error
		if !errors.As(x, &fe) {
			return len(files), 0, 0
		}
		if _, ok := files[fe.File]; !ok {
			files[fe.File] = len(files)
		}
		return files[fe.File], fe.Line, fe.Col
	}
	for _, x := range e {
		at(x)
	}
	slices.SortStableFunc(e, func(a, b error) int {
		fa, la, ca := at(a)
		fb, lb, cb := at(b)
		return cmp.Or(cmp.Compare(fa, fb), cmp.Compare(la, lb), cmp.Compare(ca, cb))
	})
	if len(e) == 1 {
		return e[0]
	}
	return errors.Join(e...)
}
