package flux_test

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
)

var update = flag.Bool("update", false, "rewrite the # want: lines of testdata/refuse and the .golden files of testdata/ok")

// header is a case file's leading comment lines: "# want: ERROR" (every error, in
// order) and "# options: filter=FILE env=K=V env-filter pipeline".
type header struct {
	want    []string
	opts    flux.Options
	env     map[string]string
	pipe    bool
	nonHead []byte // the file after the header, for -update
}

func readHeader(t *testing.T, path string) header {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := header{env: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		l := sc.Text()
		if w, ok := strings.CutPrefix(l, "# want: "); ok {
			h.want = append(h.want, w)
		} else if o, ok := strings.CutPrefix(l, "# options: "); ok {
			for _, f := range strings.Fields(o) {
				switch k, v, _ := strings.Cut(f, "="); k {
				case "filter":
					h.opts.Filter = v
				case "env-filter":
					h.opts.EnvFilter = true
				case "env":
					ek, ev, _ := strings.Cut(v, "=")
					h.env[ek] = ev
				case "pipeline":
					h.pipe = true
				default:
					t.Fatalf("%s: unknown option %q", path, f)
				}
			}
		} else {
			break
		}
		n += len(l) + 1
	}
	h.nonHead = data[n:]
	h.opts.LookupEnv = func(k string) (string, bool) { v, ok := h.env[k]; return v, ok }
	return h
}

// run loads and builds a case; it returns the built topology or every error.
func run(t *testing.T, e *env, path string, h header) (*flux.File, *flux.Built, []string) {
	f, err := flux.Load(path, h.opts)
	var b *flux.Built
	if err == nil {
		if h.pipe {
			b, err = f.BuildPipeline(&e.reg, func() topology.Spout { return &idleSpout{} }, []string{"offset", "event"})
		} else {
			b, err = f.Build(&e.reg)
		}
	}
	if err == nil {
		return f, b, nil
	}
	var msgs []string
	for _, x := range flatten(err) {
		var fe *flux.Error
		if !errors.As(x, &fe) {
			t.Errorf("%s: an error that is no *flux.Error: %v", path, x)
		}
		msgs = append(msgs, x.Error())
	}
	return f, nil, msgs
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// TestRefusals: each testdata/refuse file is refused with exactly its # want: lines,
// FILE:LINE:COL and message.
func TestRefusals(t *testing.T) {
	paths, _ := filepath.Glob("testdata/refuse/*.yaml")
	if len(paths) < 20 {
		t.Fatalf("%d refusal cases", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := readHeader(t, path)
			_, _, got := run(t, newEnv(t), path, h)
			if *update {
				var buf bytes.Buffer
				for _, g := range got {
					fmt.Fprintf(&buf, "# want: %s\n", g)
				}
				if h.opts.Filter != "" || len(h.env) > 0 || h.opts.EnvFilter || h.pipe {
					t.Fatalf("-update keeps no # options: line; edit %s by hand", path)
				}
				buf.Write(h.nonHead)
				os.WriteFile(path, buf.Bytes(), 0o644)
				return
			}
			if len(h.want) == 0 {
				t.Fatal("no # want: line")
			}
			if !slices.Equal(got, h.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(h.want, "\n"))
			}
		})
	}
}

// TestFeatures: each testdata/ok file loads and builds; what was built (components,
// streams, groupings, config, what each class's maker was given) is its .golden.
func TestFeatures(t *testing.T) {
	paths, _ := filepath.Glob("testdata/ok/*.yaml")
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := readHeader(t, path)
			e := newEnv(t)
			f, b, errs := run(t, e, path, h)
			if errs != nil {
				t.Fatalf("%s", strings.Join(errs, "\n"))
			}
			got := dump(f, b, e)
			golden := strings.TrimSuffix(path, ".yaml") + ".golden"
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("built\n%s\nwant (%s)\n%s", got, golden, want)
			}
		})
	}
}

// TestResolvedRoundTrip: Parse(File.Resolved) gives back an equal File (but for
// positions, which then point into Resolved), whose Resolved is the same bytes.
func TestResolvedRoundTrip(t *testing.T) {
	paths, _ := filepath.Glob("testdata/ok/*.yaml")
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			h := readHeader(t, path)
			f, err := flux.Load(path, h.opts)
			if err != nil {
				t.Fatal(err)
			}
			g, err := flux.Parse("resolved.yaml", f.Resolved)
			if err != nil {
				t.Fatalf("%v\n%s", err, f.Resolved)
			}
			if !bytes.Equal(g.Resolved, f.Resolved) {
				t.Errorf("Resolved changed:\n%s\nthen\n%s", f.Resolved, g.Resolved)
			}
			if bytes.Contains(f.Resolved, []byte("${")) || bytes.Contains(f.Resolved, []byte("includes")) {
				t.Errorf("Resolved is not resolved:\n%s", f.Resolved)
			}
			f.Notes = nil // said at Load, not shipped
			if want, _ := filepath.Abs(filepath.Dir(path)); f.Dir != want || g.Dir != "" {
				t.Errorf("Dir: %q after Load (want %q), %q after Parse (want none)", f.Dir, want, g.Dir)
			}
			f.Dir = "" // where the file was, not shipped
			zeroPos(reflect.ValueOf(f).Elem())
			zeroPos(reflect.ValueOf(g).Elem())
			if !reflect.DeepEqual(f, g) {
				t.Errorf("Parse(Resolved) differs:\n%#v\n%#v", f, g)
			}
		})
	}
}

var posType = reflect.TypeFor[flux.Pos]()

func zeroPos(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == posType {
			v.Set(reflect.Zero(posType))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				zeroPos(v.Field(i))
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			zeroPos(v.Elem())
		}
	case reflect.Func: // Value.Inner: positions too
		v.Set(reflect.Zero(v.Type()))
	case reflect.Slice:
		for i := range v.Len() {
			zeroPos(v.Index(i))
		}
	}
}

// dump describes what a file built, for the golden files.
func dump(f *flux.File, b *flux.Built, e *env) string {
	var w strings.Builder
	fmt.Fprintf(&w, "name: %q\n", f.Name)
	c := b.Config
	fmt.Fprintf(&w, "config: ackers=%d maxSpoutPending=%d messageTimeout=%v disableTimeouts=%t receiveQueue=%d batchSize=%d flushInterval=%v\n",
		c.Ackers, c.MaxSpoutPending, c.MessageTimeout, c.DisableTimeouts, c.ReceiveQueue, c.BatchSize, c.FlushInterval)
	fmt.Fprintf(&w, "workers: %d debug: %t ignored: %q\n", b.Workers, b.Debug, b.Ignored)
	for _, n := range f.Notes {
		fmt.Fprintf(&w, "note: %s\n", n)
	}
	for _, l := range e.log {
		fmt.Fprintf(&w, "made: %s\n", l)
	}
	for _, comp := range b.Topology.Components {
		kind := "bolt"
		if comp.IsSpout() {
			kind = "spout"
		}
		fmt.Fprintf(&w, "%s %s x%d\n", kind, comp.ID, comp.Parallelism)
		var ids []string
		for id := range comp.Streams {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			s := comp.Streams[id]
			fmt.Fprintf(&w, "  emits %s %v direct=%t\n", id, s.Source.Fields, s.Direct)
		}
		for _, in := range comp.Inputs {
			fmt.Fprintf(&w, "  reads %s/%s %s%v\n", in.Component, in.Stream, in.Grouping.Kind, in.Grouping.Fields)
		}
	}
	return w.String()
}
