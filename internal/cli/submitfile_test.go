package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/topology"
	"github.com/gale-stream/gale/tuple"
)

type sfSpout struct{ topology.BaseSpout }

func (*sfSpout) NextTuple() {}

type sfBolt struct{ topology.BaseBasicBolt }

func (*sfBolt) Execute(*tuple.Tuple, topology.BasicCollector) error { return nil }

// fileApp is gale's app with a spout class and a bolt class.
func fileApp(t *testing.T) *App {
	a := galeApp()
	for _, d := range []component.Declaration{{Class: "t.Spout",
		Spout: func(component.Spec) (func() topology.Spout, error) {
			return func() topology.Spout { return &sfSpout{} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"w"}}}, nil
		},
	}, {Class: "t.Bolt",
		BasicBolt: func(component.Spec) (func() topology.BasicBolt, error) {
			return func() topology.BasicBolt { return &sfBolt{} }, nil
		},
	}} {
		if err := a.Components.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

const sfFile = `name: "${name}"
config:
  topology.workers: 3
  some.storm.key: 1
spouts:
  - id: "words"
    className: "t.Spout"
bolts:
  - id: "sink"
    className: "t.Bolt"
    parallelism: 2
streams:
  - from: "words"
    to: "sink"
    grouping:
      type: FIELDS
      args: ["w"]
`

// Everything submit --file can refuse, it refuses before connecting (the URL is
// a closed port); --dry-run prints the topology.
func TestSubmitFileWithoutCluster(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := write("t.yaml", sfFile)
	filter := write("ok.properties", "name = tfile\n")
	nowhere := []string{"--nats", "nats://127.0.0.1:1", "--timeout", "2s"}
	submit := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := fileApp(t).Run(context.Background(), append(append([]string{"submit"}, args...), nowhere...), &out, &errb)
		return code, out.String(), errb.String()
	}

	code, out, stderr := submit("--file", file, "--filter", filter, "--dry-run", "--resources", dir)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	for _, w := range []string{"topology tfile (" + file + "): 4 tasks, 3 workers; checked, not submitted",
		"words      t.Spout  1            -", "sink       t.Bolt   2            words fields(w)", "resources: ", "fingerprint: tfile shape "} {
		if !strings.Contains(out, w) {
			t.Errorf("dry run printed no %q:\n%s", w, out)
		}
	}
	if !strings.Contains(stderr, "ignored: some.storm.key") {
		t.Errorf("dry run's stderr: %q", stderr)
	}

	for _, c := range []struct {
		name string
		args []string
		want string // a regexp of stderr
	}{
		{"unknown class", []string{"--file", write("bad.yaml", strings.Replace(sfFile, "t.Bolt", "t.Blot", 1)), "--filter", filter},
			regexp.QuoteMeta(filepath.Join(dir, "bad.yaml")) + `:10:16: "sink": unknown class "t.Blot"; did you mean "t.Bolt"\?`},
		{"no filter", []string{"--file", file}, regexp.QuoteMeta(file) + `:1:8: \$\{name\}`},
		{"a Go topology's name", []string{"--file", file, "--filter", write("wc.properties", "name = wordcount\n")},
			`:1:7: name "wordcount" is a topology registered in this build`},
		{"a pipeline's name", []string{"--file", file, "--filter", write("ev.properties", "name = events\n")}, `name "events" is a serve pipeline`},
		{"a bad name", []string{"--file", file, "--filter", write("dot.properties", "name = a.b\n")}, `:1:7: .*topology name "a.b"`},
		{"no resources", []string{"--file", file, "--filter", filter, "--resources", filepath.Join(dir, "none")}, `--resources .*none: .*no such file`},
		{"a topology word too", []string{"--file", file, "--filter", filter, "wordcount"}, `--file .* names the topology`},
		{"--filter without --file", []string{"--filter", filter, "wordcount"}, `go with --file`},
	} {
		code, _, stderr := submit(c.args...)
		if code == 0 || !regexp.MustCompile(c.want).MatchString(stderr) || strings.Contains(stderr, "127.0.0.1:1") {
			t.Errorf("%s: exit %d, stderr %q, want %s", c.name, code, stderr, c.want)
		}
	}
}
