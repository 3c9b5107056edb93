package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// LineFormat is how a line sink writes a tuple.
type LineFormat string

// The line formats.
const (
	// JSONLines writes one JSON object per tuple, its keys the fields in order. A
	// []byte in valid UTF-8 is written as a string (a payload is usually text), any
	// other []byte as base64, as encoding/json does.
	JSONLines LineFormat = "json"
	// TabSeparated writes the values, tab-separated, one tuple per line: strings
	// and []byte as they are, with \ tab, newline and carriage return escaped as
	// \\ \t \n \r (so a line is always one tuple); lists and maps as JSON; others
	// as fmt's %v.
	TabSeparated LineFormat = "tsv"
)

// LineSink writes one line per input tuple, to a file or to standard output, for
// trying a topology out. It acks an input once its line is written (handed to the
// operating system; with WithSync, on the disk), and fails it if the write fails.
//
// It is at least once, not exactly once: a replayed tuple is written again, so a
// line may appear twice. Use the SQL sink where each effect must happen once.
type LineSink struct {
	path   string // "" for w
	w      io.Writer
	format LineFormat
	fields []string
	sync   bool
	trunc  bool

	mu   sync.Mutex // serialises the tasks' writes: a line is one write
	f    *os.File
	refs int
}

// LineOption configures a LineSink.
type LineOption func(*LineSink) error

// WithFormat sets the line format. Default JSONLines.
func WithFormat(f LineFormat) LineOption {
	return func(s *LineSink) error {
		if f != JSONLines && f != TabSeparated {
			return fmt.Errorf("format %q: want %q or %q", string(f), JSONLines, TabSeparated)
		}
		s.format = f
		return nil
	}
}

// WithLineFields writes only these fields, in this order (an input without one of
// them is failed, naming it). Default: every field of the input, in its order.
func WithLineFields(names ...string) LineOption {
	return func(s *LineSink) error {
		seen := map[string]bool{}
		for i, n := range names {
			switch {
			case n == "":
				return fmt.Errorf("fields: element %d is empty", i)
			case seen[n]:
				return fmt.Errorf("fields: %q twice", n)
			}
			seen[n] = true
		}
		if len(names) == 0 {
			return errors.New("fields: an empty list (leave it out to write every field)")
		}
		s.fields = append([]string(nil), names...)
		return nil
	}
}

// WithSync syncs the file to the disk after each line, before the ack: an acked
// line then survives a power loss too (slow; for a file only).
func WithSync() LineOption { return func(s *LineSink) error { s.sync = true; return nil } }

// WithTruncate empties the file when the first task opens it. Default: lines are
// appended to what the file holds (a restarted topology keeps what it wrote).
func WithTruncate() LineOption { return func(s *LineSink) error { s.trunc = true; return nil } }

// NewFileSink returns a sink appending lines to the file at path (created if
// missing, its directory must exist). The tasks of one sink in one process share
// the file; on a cluster each worker writes its own file at path.
func NewFileSink(path string, opts ...LineOption) (*LineSink, error) {
	if path == "" {
		return nil, errors.New("file sink: empty path")
	}
	return newLineSink(&LineSink{path: path}, opts)
}

// NewWriterSink returns a sink writing lines to w (os.Stdout for gale.sink.Stdout),
// one Write per line, its writes serialised with every other sink on the same w.
func NewWriterSink(w io.Writer, opts ...LineOption) (*LineSink, error) {
	if w == nil {
		return nil, errors.New("writer sink: nil writer")
	}
	return newLineSink(&LineSink{w: w}, opts)
}

func newLineSink(s *LineSink, opts []LineOption) (*LineSink, error) {
	s.format = JSONLines
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("line sink: a nil option")
		}
		if err := o(s); err != nil {
			return nil, fmt.Errorf("line sink: %w", err)
		}
	}
	if s.path == "" && (s.sync || s.trunc) {
		return nil, errors.New("line sink: sync and truncate are for a file")
	}
	return s, nil
}

// Bolt returns a new task: the factory for Builder.SetBolt.
func (s *LineSink) Bolt() topology.Bolt { return &lineBolt{snk: s} }

// writerLocks serialise sinks that share a writer (every gale.sink.Stdout of a
// process writes to os.Stdout): a line is never split by another's.
var (
	writerLocksMu sync.Mutex
	writerLocks   = map[io.Writer]*sync.Mutex{}
)

func writerLock(w io.Writer) *sync.Mutex {
	writerLocksMu.Lock()
	defer writerLocksMu.Unlock()
	m := writerLocks[w]
	if m == nil {
		m = &sync.Mutex{}
		writerLocks[w] = m
	}
	return m
}

func (s *LineSink) open() error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		flag := os.O_WRONLY | os.O_CREATE | os.O_APPEND
		if s.trunc {
			flag |= os.O_TRUNC
			s.trunc = false // once: a task restarted later appends
		}
		f, err := os.OpenFile(s.path, flag, 0o644)
		if err != nil {
			return fmt.Errorf("%s: %w", FileSinkClass, err)
		}
		s.f = f
	}
	s.refs++
	return nil
}

func (s *LineSink) release() error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs--; s.refs == 0 {
		err := s.f.Close()
		s.f = nil
		return err
	}
	return nil
}

func (s *LineSink) write(line []byte) error {
	if s.path == "" {
		m := writerLock(s.w)
		m.Lock()
		defer m.Unlock()
		_, err := s.w.Write(line)
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, err := s.f.Write(line); err != nil {
		if n > 0 {
			// Part of the line is in the file (a disk full, a size limit): cut it
			// back to where the line began, or the input's replay would be appended
			// to a broken line. The tasks' writes are serialised, so the line is the
			// file's last n bytes.
			if terr := s.cutTail(int64(n)); terr != nil {
				return fmt.Errorf("%w (and %d bytes of the line are left in the file: %v)", err, n, terr)
			}
		}
		return err
	}
	if s.sync {
		return s.f.Sync()
	}
	return nil
}

// cutTail truncates the file by its last n bytes.
func (s *LineSink) cutTail(n int64) error {
	st, err := s.f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < n {
		return fmt.Errorf("the file has %d bytes, fewer than the %d written", st.Size(), n)
	}
	return s.f.Truncate(st.Size() - n)
}

type lineBolt struct {
	snk *LineSink
	out topology.OutputCollector
	buf bytes.Buffer
}

func (b *lineBolt) Prepare(_ context.Context, tc topology.TaskContext, out topology.OutputCollector) error {
	b.out = out
	if b.snk.path == "" && b.snk.w == nil {
		return errors.New("builtin: a zero LineSink, made by no constructor: make it with NewFileSink or NewWriterSink")
	}
	class := FileSinkClass
	if b.snk.path == "" {
		class = StdoutSinkClass
	}
	if err := ioCheckInputs(tc, class, "field", b.snk.fields); err != nil {
		return err
	}
	return b.snk.open()
}

func (b *lineBolt) Execute(t *tuple.Tuple) {
	b.buf.Reset()
	if err := b.snk.line(&b.buf, t); err != nil {
		_ = b.out.FailWith(t, err)
		return
	}
	if err := b.snk.write(b.buf.Bytes()); err != nil {
		_ = b.out.FailWith(t, fmt.Errorf("line sink: write: %w", err))
		return
	}
	_ = b.out.Ack(t)
}

func (b *lineBolt) Cleanup() error { return b.snk.release() }

// line formats t as one line, newline included.
func (s *LineSink) line(buf *bytes.Buffer, t *tuple.Tuple) error {
	names := s.fields
	if names == nil {
		names = t.Fields().Names()
	}
	vals := make([]any, len(names))
	for i, n := range names {
		v, ok := t.Lookup(n)
		if !ok {
			return fmt.Errorf("line sink: a tuple from %s has no field %q (it has %v)", t.SourceComponent(), n, t.Fields())
		}
		vals[i] = v
	}
	switch s.format {
	case TabSeparated:
		for i, v := range vals {
			if i > 0 {
				buf.WriteByte('\t')
			}
			var text string
			switch x := v.(type) {
			case string:
				text = x
			case []byte:
				text = string(x)
			default:
				text = fmt.Sprint(v)
				// A list or map as JSON ([1290,3]), not fmt's [1290 3], whose
				// elements run together.
				if k := reflect.ValueOf(v).Kind(); k == reflect.Slice || k == reflect.Array || k == reflect.Map {
					if j, err := json.Marshal(x); err == nil {
						text = string(j)
					}
				}
			}
			tsvEscaper.WriteString(buf, text)
		}
	default:
		buf.WriteByte('{')
		for i, n := range names {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n)
			buf.Write(k)
			buf.WriteByte(':')
			v := vals[i]
			if b, ok := v.([]byte); ok && utf8.Valid(b) {
				v = string(b)
			}
			j, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("line sink: field %q (%T) has no JSON form: %w", n, vals[i], err)
			}
			buf.Write(j)
		}
		buf.WriteByte('}')
	}
	buf.WriteByte('\n')
	return nil
}

var tsvEscaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`)

// ioStdout is what gale.sink.Stdout writes to (a test replaces it).
var ioStdout io.Writer = os.Stdout

// lineOptions reads the properties the line sink classes share: format, fields.
func lineOptions(s component.Spec) ([]LineOption, error) {
	format, err := s.String("format", string(JSONLines))
	if err != nil {
		return nil, err
	}
	opts := []LineOption{WithFormat(LineFormat(format))}
	if err := WithFormat(LineFormat(format))(&LineSink{}); err != nil {
		return nil, ioPropError("format", "%q: want %q (one JSON object per line) or %q (tab-separated values)", format, JSONLines, TabSeparated)
	}
	if fields, err := s.Strings("fields", nil); err != nil {
		return nil, err
	} else if fields != nil {
		if err := WithLineFields(fields...)(&LineSink{}); err != nil {
			return nil, ioPropError("fields", "%v", err)
		}
		// A field the input lacks would fail every tuple at runtime, replayed for ever.
		if err := s.NeedInputFields("fields", fields...); err != nil {
			return nil, err
		}
		opts = append(opts, WithLineFields(fields...))
	}
	return opts, nil
}

func fileSinkDecl() component.Declaration {
	return component.Declaration{
		Class: FileSinkClass,
		Doc:   "appends one line per input (JSON or tab-separated) to a file, for trying things: at least once, a replayed tuple is written again",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			if err := s.Require("path"); err != nil {
				return nil, err
			}
			path, err := s.String("path", "")
			if err != nil {
				return nil, err
			}
			if path == "" {
				return nil, ioPropError("path", "empty: want the file to write")
			}
			if !filepath.IsAbs(path) && s.Dir != "" {
				path = filepath.Join(s.Dir, path) // relative to the topology file, as its other files
			}
			if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
				return nil, ioPropError("path", "%s: its directory %s does not exist", path, filepath.Dir(path))
			}
			if fi, err := os.Stat(path); err == nil && fi.IsDir() {
				return nil, ioPropError("path", "%s is a directory: want a file", path)
			}
			opts, err := lineOptions(s)
			if err != nil {
				return nil, err
			}
			for _, b := range []struct {
				key string
				opt LineOption
			}{{"sync", WithSync()}, {"truncate", WithTruncate()}} {
				on, err := s.Bool(b.key, false)
				if err != nil {
					return nil, err
				}
				if on {
					opts = append(opts, b.opt)
				}
			}
			snk, err := NewFileSink(path, opts...)
			if err != nil {
				return nil, err
			}
			return snk.Bolt, nil
		},
	}
}

func stdoutSinkDecl() component.Declaration {
	return component.Declaration{
		Class: StdoutSinkClass,
		Doc:   "writes one line per input (JSON or tab-separated) to standard output, for trying things: at least once, a replayed tuple is written again",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			opts, err := lineOptions(s)
			if err != nil {
				return nil, err
			}
			snk, err := NewWriterSink(ioStdout, opts...)
			if err != nil {
				return nil, err
			}
			return snk.Bolt, nil
		},
	}
}
