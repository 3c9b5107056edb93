package flux

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Options are Flux's command-line options that change how a file reads.
type Options struct {
	// Filter is Flux's --filter FILE: a properties file (key: value or key=value
	// lines; # and ! start comments) whose keys ${key} names.
	Filter string
	// EnvFilter is Flux's --env-filter: ${ENV-NAME} is replaced by the environment
	// variable NAME. Without it a ${ENV-NAME} is refused (Flux leaves it as text).
	EnvFilter bool
	// LookupEnv looks environment variables up; nil is os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Load reads path, substitutes ${key} and ${ENV-NAME}, resolves its includes
// (relative to the including file; override as in Flux), parses with positions and
// checks the structure: YAML syntax, unknown keys, types, ids unique, refs to
// components: entries, streams' from and to declared, groupings known, cycles. It
// does not look classes up (Build does).
func Load(path string, o Options) (*File, error) {
	props, err := readFilter(o.Filter)
	if err != nil {
		return nil, err
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	f, err := loadOne(path, props, o, true)
	if err != nil {
		return nil, err
	}
	var e errs
	for _, in := range f.includes {
		p := in.file
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		data, err := readSource(p)
		if err != nil {
			e.at(in.pos, "include %q: %v", in.file, err)
			continue
		}
		inc, err := loadText(p, data, props, o, false)
		if err != nil {
			e = append(e, err)
			continue
		}
		f.merge(inc, in)
	}
	f.includes = nil
	if err := e.err(); err != nil {
		return nil, err
	}
	if err := f.check(); err != nil {
		return nil, err
	}
	if f.Resolved, err = f.encode(); err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(path); err == nil {
		f.Dir = filepath.Dir(abs)
	}
	return f, nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// MaxFileSize bounds a topology file, an included file and a --filter file.
const MaxFileSize = 16 << 20

// readSource reads a file Load reads: a regular file of at most MaxFileSize
// bytes. A directory, a device (/dev/zero would be read until memory runs out) or
// a FIFO (its read would block for good) is refused before it is opened.
func readSource(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", describeMode(fi.Mode()))
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%d bytes, more than the %d a file may have", fi.Size(), MaxFileSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPath(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, unwrapPath(err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("more than the %d bytes a file may have", MaxFileSize)
	}
	return data, nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

func loadOne(path string, props map[string]string, o Options, top bool) (*File, error) {
	data, err := readSource(path)
	if err != nil {
		return nil, &Error{File: path, Line: 1, Col: 1, Msg: err.Error()}
	}
	return loadText(path, data, props, o, top)
}

func loadText(path string, data []byte, props map[string]string, o Options, top bool) (*File, error) {
	text, shifts, err := substitute(path, string(data), props, o)
	if err != nil {
		return nil, err
	}
	return parseDoc(path, []byte(text), top, shifts)
}

var variable = regexp.MustCompile(`\$\{([^}]*)\}`)

// substitute replaces every ${key} and ${ENV-NAME} of the text, line by line as Flux
// does (so lines keep their numbers), and says how each substitution moved the
// columns of its line (shifts, by line), so that a place found in the substituted
// text is given in the file. Lines that are YAML comments are left alone. A variable
// with no value is refused at its position: Flux would leave it as text, which then
// reaches a class as a value nobody meant.
func substitute(name, text string, props map[string]string, o Options) (string, map[int][]shift, error) {
	var e errs
	var shifts map[int][]shift
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || !strings.Contains(line, "${") {
			continue
		}
		var b strings.Builder
		last := 0
		for _, m := range variable.FindAllStringSubmatchIndex(line, -1) {
			b.WriteString(line[last:m[0]])
			last = m[1]
			key := line[m[2]:m[3]]
			col := utf8.RuneCountInString(line[:m[0]]) + 1
			at := Pos{name, i + 1, col}
			from := utf8.RuneCountInString(b.String()) + 1
			if v, ok := lookup(&e, at, key, props, o); ok {
				b.WriteString(v)
			}
			if shifts == nil {
				shifts = map[int][]shift{}
			}
			shifts[i+1] = append(shifts[i+1], shift{from: from, to: utf8.RuneCountInString(b.String()) + 1,
				col: col, end: col + utf8.RuneCountInString(line[m[0]:m[1]])})
		}
		b.WriteString(line[last:])
		lines[i] = b.String()
	}
	return strings.Join(lines, "\n"), shifts, e.err()
}

// lookup is the value of ${key}, refused at at when it has none.
func lookup(e *errs, at Pos, key string, props map[string]string, o Options) (string, bool) {
	if env, ok := strings.CutPrefix(key, "ENV-"); ok {
		switch v, set := o.LookupEnv(env); {
		case !o.EnvFilter:
			e.at(at, "${%s}: environment substitution needs --env-filter, as in Flux", key)
		case !set:
			e.at(at, "${%s}: environment variable %s is not set", key, env)
		case strings.ContainsAny(v, "\r\n"):
			e.at(at, "${%s}: environment variable %s holds a line break (substitution is per line)", key, env)
		default:
			return v, true
		}
		return "", false
	}
	v, ok := props[key]
	switch {
	case props == nil:
		e.at(at, "${%s}: no --filter file gives properties", key)
	case !ok:
		e.at(at, "${%s}: the --filter file has no property %q", key, key)
	default:
		return v, true
	}
	return "", false
}

// shift is one substitution on a line: the substituted text's columns [from, to)
// hold the value of the ${...} at the file's columns [col, end).
type shift struct{ from, to, col, end int }

// fileCol is the file's column of column c of line (1-based, in characters) of the
// substituted text: a column after a substitution moves by what it changed, one
// inside a substituted value is the ${ of the variable.
func fileCol(shifts []shift, c int) int {
	moved := 0
	for _, s := range shifts {
		switch {
		case c < s.from:
			return c + moved
		case c < s.to:
			return s.col
		}
		moved = s.end - s.to
	}
	return c + moved
}

// readFilter reads a properties file: key=value or key: value lines, # or ! comments,
// blank lines. nil when path is "".
func readFilter(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	data, err := readSource(path)
	if err != nil {
		return nil, &Error{File: path, Line: 1, Col: 1, Msg: "--filter: " + err.Error()}
	}
	var e errs
	props := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == '!' {
			continue
		}
		sep := strings.IndexAny(t, "=:")
		col := len(line) - len(strings.TrimLeft(line, " \t")) + 1
		if sep <= 0 {
			e.at(Pos{path, i + 1, col}, "want key=value or key: value, got %q", t)
			continue
		}
		props[strings.TrimSpace(t[:sep])] = strings.TrimSpace(t[sep+1:])
	}
	return props, e.err()
}

// merge adds an included file to f as Flux does: with override, the included file's
// name, config keys, components, spouts and bolts (by id) replace f's; without, f's
// stay (and a Note says what was not taken); streams are added.
func (f *File) merge(inc *File, in include) {
	note := func(p Pos, format string, a ...any) {
		f.Notes = append(f.Notes, fmt.Sprintf("%s: %s (include %s has override: false)", p, fmt.Sprintf(format, a...), in.file))
	}
	if inc.Name != "" {
		switch {
		case f.Name == "" || in.override:
			f.Name, f.NamePos = inc.Name, inc.NamePos
		case f.Name != inc.Name:
			note(inc.NamePos, "name %q not taken: the file's is %q", inc.Name, f.Name)
		}
	}
	for _, s := range inc.Config {
		i := indexOf(f.Config, func(c Setting) bool { return c.Key == s.Key })
		switch {
		case i < 0:
			f.Config = append(f.Config, s)
		case in.override:
			f.Config[i] = s
		default:
			note(s.Pos, "config %q not taken: the file sets it", s.Key)
		}
	}
	mergeBeans := func(dst *[]*Bean, src []*Bean, what string) {
		for _, b := range src {
			i := indexOf(*dst, func(d *Bean) bool { return d.ID == b.ID })
			switch {
			case i < 0:
				*dst = append(*dst, b)
			case in.override:
				(*dst)[i] = b
			default:
				note(b.IDPos, "%s %q not taken: the file declares it", what, b.ID)
			}
		}
	}
	mergeBeans(&f.Components, inc.Components, "component")
	mergeBeans(&f.Spouts, inc.Spouts, "spout")
	mergeBeans(&f.Bolts, inc.Bolts, "bolt")
	f.Streams = append(f.Streams, inc.Streams...)
}

func indexOf[T any](s []T, match func(T) bool) int {
	for i, v := range s {
		if match(v) {
			return i
		}
	}
	return -1
}
