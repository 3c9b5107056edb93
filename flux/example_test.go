package flux_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
	"github.com/gale-stream/gale/topology"
)

func Example() {
	// The binary's classes: a spout of words and a sink.
	var reg component.Registry
	reg.Register(component.Declaration{
		Class: "example.Words",
		Spout: func(component.Spec) (func() topology.Spout, error) {
			return func() topology.Spout { return &idleSpout{} }, nil
		},
		Outputs: func(component.Spec) ([]component.Output, error) {
			return []component.Output{{Fields: []string{"word"}}}, nil
		},
	})
	reg.Register(component.Declaration{
		Class: "example.Keep",
		Bolt: func(s component.Spec) (func() topology.Bolt, error) {
			if _, err := s.Int("limit", 0); err != nil {
				return nil, err
			}
			return func() topology.Bolt { return &ackBolt{} }, nil
		},
	})

	dir, _ := os.MkdirTemp("", "flux-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "words.yaml")
	os.WriteFile(path, []byte(strings.TrimSpace(`
name: "words"
config:
  topology.workers: 2
  topology.max.spout.pending: 10
  topology.fall.back.on.java.serialization: false
spouts:
  - {id: "words", className: "example.Words"}
bolts:
  - id: "keep"
    className: "example.Keep"
    parallelism: 2
    properties:
      - {name: limit, value: 5}
streams:
  - {from: "words", to: "keep", grouping: {type: FIELDS, args: ["word"]}}
`)), 0o644)

	f, err := flux.Load(path, flux.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := f.Build(&reg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.Name, len(b.Topology.Components), "components,", b.Workers, "workers, max pending", b.Config.MaxSpoutPending)
	fmt.Println("ignored:", strings.Join(b.Ignored, ", "))

	// The same file with a typo in a grouping's field: refused at its line and column.
	os.WriteFile(path, []byte(strings.Replace(string(f.Resolved), "args: [word]", "args: [wrod]", 1)), 0o644)
	f, err = flux.Load(path, flux.Options{})
	if err == nil {
		_, err = f.Build(&reg)
	}
	fmt.Println(strings.TrimPrefix(err.Error(), dir+string(filepath.Separator)))
	// Output:
	// words 2 components, 2 workers, max pending 10
	// ignored: topology.fall.back.on.java.serialization
	// words.yaml:22:15: FIELDS grouping on "wrod", which stream "default" of "words" does not declare (its fields: word)
}
