package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/cluster/placement"
	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

// Pack makes one archive of one tree (whatever the files' times), keeps the
// executable bit, and Unpack gives the tree back.
func TestPackUnpack(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "alpha\n", 0o644)
	write("bin/run.sh", "#!/bin/sh\necho hi\n", 0o755)
	write("deep/er/z.txt", "zed", 0o600)
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	a1, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, "a.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	a2, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if Digest(a1) != Digest(a2) {
		t.Errorf("one tree, two digests: %s and %s", Digest(a1), Digest(a2))
	}
	dest := t.TempDir()
	if err := Unpack(a1, dest); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"a.txt": "alpha\n", "bin/run.sh": "#!/bin/sh\necho hi\n", "deep/er/z.txt": "zed"} {
		b, err := os.ReadFile(filepath.Join(dest, rel))
		if err != nil || string(b) != want {
			t.Errorf("%s: %q %v, want %q", rel, b, err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(dest, "bin/run.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("bin/run.sh lost its executable bit: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dest, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("empty directory: %v", err)
	}
	write("a.txt", "changed\n", 0o644)
	if a3, err := Pack(dir); err != nil || Digest(a3) == Digest(a1) {
		t.Errorf("a changed file, the same digest (%v)", err)
	}
	if _, err := Pack(filepath.Join(dir, "a.txt")); err == nil {
		t.Error("Pack of a file: no error")
	}
}

// Unpack refuses entries that would land outside its directory, and links.
func TestUnpackRefusesEscapes(t *testing.T) {
	for _, h := range []tar.Header{
		{Name: "../evil", Typeflag: tar.TypeReg},
		{Name: "a/../../evil", Typeflag: tar.TypeReg},
		{Name: "/etc/evil", Typeflag: tar.TypeReg},
		{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		{Name: "hard", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		h.Mode = 0o644
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		parent := t.TempDir()
		dest := filepath.Join(parent, "in")
		if err := os.Mkdir(dest, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := Unpack(buf.Bytes(), dest); err == nil {
			t.Errorf("%s (%c): unpacked", h.Name, h.Typeflag)
		}
		if _, err := os.Lstat(filepath.Join(parent, "evil")); err == nil {
			t.Errorf("%s: written outside", h.Name)
		}
	}
}

// The document and resources go into the object store by digest; a fetch checks
// them and unpacks the resources once per digest.
func TestPutFetchSource(t *testing.T) {
	url := runServer(t).ClientURL()
	prefix := newPrefix()
	st := openStore(t, url, Config{Prefix: prefix})
	ctx := ctxT(t, 30*time.Second)
	doc := []byte("name: x\n")
	res := t.TempDir()
	if err := os.WriteFile(filepath.Join(res, "words.txt"), []byte("one two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := Pack(res)
	if err != nil {
		t.Fatal(err)
	}
	src, err := st.PutSource(ctx, "x.yaml", doc, archive)
	if err != nil {
		t.Fatal(err)
	}
	if src.File != "x.yaml" || src.Digest != Digest(doc) || src.Resources != Digest(archive) {
		t.Fatalf("source %+v", src)
	}
	if again, err := st.PutSource(ctx, "x.yaml", doc, archive); err != nil || *again != *src {
		t.Fatalf("put again: %+v %v", again, err)
	}
	// Another process (a worker) fetches it.
	other := openStore(t, url, Config{Prefix: prefix})
	dir := filepath.Join(t.TempDir(), "gale-resources")
	got, rdir, err := other.FetchSource(ctx, "x", src, dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(doc) || rdir != filepath.Join(dir, "x-"+src.Resources[:16]) {
		t.Fatalf("fetched %q into %s", got, rdir)
	}
	if b, err := os.ReadFile(filepath.Join(rdir, "words.txt")); err != nil || string(b) != "one two\n" {
		t.Fatalf("unpacked words.txt: %q %v", b, err)
	}
	// Unpacked once: a second fetch reuses the directory.
	marker := filepath.Join(rdir, "marker")
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, rdir2, err := other.FetchSource(ctx, "x", src, dir); err != nil || rdir2 != rdir {
		t.Fatalf("fetched again: %s %v", rdir2, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("unpacked again: %v", err)
	}
	// Without resources: no directory.
	if _, rdir, err := other.FetchSource(ctx, "x", &Source{File: "x.yaml", Digest: src.Digest}, dir); err != nil || rdir != "" {
		t.Errorf("no resources: %q %v", rdir, err)
	}
	// A digest nobody put.
	_, _, err = other.FetchSource(ctx, "x", &Source{File: "y.yaml", Digest: Digest([]byte("other"))}, dir)
	if !errors.Is(err, ErrSourceMissing) {
		t.Errorf("missing document: %v", err)
	}
	// A cluster where nothing was ever put has no files bucket.
	empty := openStore(t, url, Config{Prefix: newPrefix()})
	if _, _, err := empty.FetchSource(ctx, "x", src, dir); !errors.Is(err, ErrSourceMissing) {
		t.Errorf("no bucket: %v", err)
	}
}

// classes is a component registry with a spout and a sink bolt.
func classes(t *testing.T, names ...string) *component.Registry {
	t.Helper()
	var reg component.Registry
	for _, n := range names {
		d := component.Declaration{Class: n}
		if strings.HasSuffix(n, "Spout") {
			d.Spout = func(component.Spec) (func() topology.Spout, error) {
				return func() topology.Spout { return &idleSpout{} }, nil
			}
			d.Outputs = func(component.Spec) ([]component.Output, error) {
				return []component.Output{{Fields: []string{"n"}}}, nil
			}
		} else {
			d.BasicBolt = func(component.Spec) (func() topology.BasicBolt, error) {
				return func() topology.BasicBolt { return &nopBasicBolt{} }, nil
			}
		}
		if err := reg.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	return &reg
}

type idleSpout struct{ topology.BaseSpout }

func (*idleSpout) NextTuple() {}

type nopBasicBolt struct{ topology.BaseBasicBolt }

func (*nopBasicBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

const testFile = `name: "ft"
spouts:
  - id: "src"
    className: "t.Spout"
bolts:
  - id: "sink"
    className: "t.Sink"
    parallelism: 2
streams:
  - from: "src"
    to: "sink"
    grouping:
      type: SHUFFLE
`

// A registry builds a topology file with its file factory, whatever the name; one
// without a file factory, or whose classes lack one the file names, refuses it
// naming what is missing.
func TestRegistryFileFactory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ft.yaml")
	if err := os.WriteFile(path, []byte(testFile), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &Source{File: "ft.yaml", Digest: Digest(f.Resolved)}
	env := Env{Topology: "ft", Source: src, Document: f.Resolved}
	ctx := context.Background()

	var r Registry
	if _, err := r.Build(ctx, env); !errors.Is(err, ErrUnknownTopology) || !strings.Contains(err.Error(), "does not build topology files") {
		t.Errorf("no file factory: %v", err)
	}
	r.SetFileFactory(FileFactory(classes(t, "t.Spout", "t.Sink")))
	d, err := r.Build(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Topology.Components) != 2 || d.Topology.Components[1].Parallelism != 2 {
		t.Errorf("built %+v", d.Topology.Components)
	}
	// The fingerprint is the submitter's (built from the file) plus the source.
	b, err := f.Build(classes(t, "t.Spout", "t.Sink"))
	if err != nil {
		t.Fatal(err)
	}
	want := FingerprintOf("ft", b.Topology, b.Config)
	want.Source = src.Fingerprint()
	have := FingerprintOf("ft", d.Topology, d.Config)
	have.Source = src.Fingerprint()
	if err := Check(want, have); err != nil {
		t.Error(err)
	}

	// A build without t.Sink: the class and its place in the resolved document.
	r.SetFileFactory(FileFactory(classes(t, "t.Spout")))
	_, err = r.Build(ctx, env)
	if err == nil || !strings.Contains(err.Error(), `t.Sink`) || !regexp.MustCompile(`ft\.yaml:\d+:\d+: `).MatchString(err.Error()) {
		t.Errorf("a missing class: %v", err)
	}
	// A document that names another topology than submitted.
	if _, err := r.Build(ctx, Env{Topology: "other", Source: src, Document: f.Resolved}); err == nil {
		t.Error("a document of another name: built")
	}
	// A registered Go topology of the name does not take a file's place.
	topo, cfg := shape(t, "")
	if err := r.Register("ft", func(context.Context, Env) (*Deployment, error) { return &Deployment{Topology: topo, Config: cfg}, nil }); err != nil {
		t.Fatal(err)
	}
	r.SetFileFactory(FileFactory(classes(t, "t.Spout", "t.Sink")))
	if d, err := r.Build(ctx, env); err != nil || d.Topology == topo {
		t.Errorf("a file named as a Go topology built the Go one (%v)", err)
	}
}

// Two sources differ in the fingerprint, and Check says so.
func TestFingerprintSource(t *testing.T) {
	a := &Source{File: "a.yaml", Digest: Digest([]byte("a"))}
	b := &Source{File: "a.yaml", Digest: Digest([]byte("b"))}
	c := &Source{File: "a.yaml", Digest: a.Digest, Resources: Digest([]byte("r"))}
	renamed := &Source{File: "elsewhere/a.yaml", Digest: a.Digest}
	if a.Fingerprint() == b.Fingerprint() || a.Fingerprint() == c.Fingerprint() || a.Fingerprint() != renamed.Fingerprint() {
		t.Errorf("fingerprints %s %s %s %s", a.Fingerprint(), b.Fingerprint(), c.Fingerprint(), renamed.Fingerprint())
	}
	if (*Source)(nil).Fingerprint() != "" {
		t.Error("nil source has a fingerprint")
	}
	topo, cfg := shape(t, "")
	want, have := FingerprintOf("x", topo, cfg), FingerprintOf("x", topo, cfg)
	want.Source, have.Source = a.Fingerprint(), b.Fingerprint()
	err := Check(want, have)
	if !errors.Is(err, ErrFingerprint) || !strings.Contains(err.Error(), "source "+a.Fingerprint()) {
		t.Errorf("Check: %v", err)
	}
	have.Module = "v9.9.9" // not compared (rolling upgrades)
	have.Source = a.Fingerprint()
	if err := Check(want, have); err != nil {
		t.Errorf("Check of one source, two modules: %v", err)
	}
	if !strings.Contains(want.String(), " source "+a.Fingerprint()+" ") {
		t.Errorf("String %q", want.String())
	}
}

// The scheduler's record carries the spec's source to the workers.
func TestDecideCopiesSource(t *testing.T) {
	topo, cfg := shape(t, "")
	src := &Source{File: "f.yaml", Digest: Digest([]byte("f")), Resources: Digest([]byte("r"))}
	spec := &Spec{Topology: "f", Tasks: TasksOf(topo, cfg), Want: 1, Source: src, Revision: 1}
	next, err := decide(spec, nil, []placement.Worker{{Name: "w1", Slots: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if next.Source == nil || *next.Source != *src || next.Source == src {
		t.Errorf("record's source %+v, want a copy of %+v", next.Source, src)
	}
}
