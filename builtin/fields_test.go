package builtin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/flux"
)

// A property that names a field of the input (a sink's fields or columns, split's
// field, count's key, sum's value) is checked against the input's fields at build:
// a misspelt one is refused at its line, where it used to fail every tuple at
// runtime and have its line replayed for ever. Mode's default is named when a
// version column comes without it.
func TestFieldNamesCheckedAtBuild(t *testing.T) {
	books, err := filepath.Abs("../testdata/books")
	if err != nil {
		t.Fatal(err)
	}
	head := `name: fields
spouts:
  - id: lines
    className: gale.spout.Files
    constructorArgs: ["` + books + `/*.txt"]
bolts:
  - id: split
    className: gale.bolt.Split
`
	streams := `streams:
  - {from: lines, to: split, grouping: {type: SHUFFLE}}
  - {from: split, to: out, grouping: {type: FIELDS, args: [word]}}
`
	for _, c := range []struct {
		name, split, out, want string
	}{
		{"stdout fields", ``, `  - id: out
    className: gale.sink.Stdout
    properties:
      - {name: fields, value: [wrod, pos]}
`, `:12:32: component "out" (class "gale.sink.Stdout"): invalid spec: property fields: "wrod" is not a field of stream "default" of "split", which this bolt reads (its fields: word, pos, off)`},
		{"sql columns", ``, `  - id: out
    className: gale.sink.SQL
    properties:
      - {name: url, value: "sqlite:/nonexistent/x.db"}
      - {name: table, value: words}
      - {name: columns, value: [word, offs]}
      - {name: conflict, value: [word]}
`, `:14:39: component "out" (class "gale.sink.SQL"): invalid spec: property columns: "offs" is not a field of stream "default" of "split"`},
		{"count key", ``, `  - id: out
    className: gale.bolt.Count
    properties:
      - {name: key, value: wrod}
      - {name: output, value: /tmp/counts.tsv}
`, `:12:28: component "out" (class "gale.bolt.Count"): invalid spec: property key: "wrod" is not a field of stream "default" of "split"`},
		{"sum value", ``, `  - id: out
    className: gale.bolt.Sum
    properties:
      - {name: value, value: off2}
      - {name: output, value: /tmp/sums.tsv}
`, `:12:30: component "out" (class "gale.bolt.Sum"): invalid spec: property value: "off2" is not a field of stream "default" of "split"`},
		{"split field", `    properties:
      - {name: field, value: text}
`, `  - id: out
    className: gale.sink.Stdout
`, `:10:30: component "split" (class "gale.bolt.Split"): invalid spec: property field: "text" is not a field of stream "default" of "lines", which this bolt reads (its fields: line, pos)`},
		{"version without mode", ``, `  - id: out
    className: gale.sink.SQL
    properties:
      - {name: url, value: "sqlite:/nonexistent/x.db"}
      - {name: table, value: words}
      - {name: columns, value: [word, pos]}
      - {name: conflict, value: [word]}
      - {name: version, value: pos}
`, `property "version": a version column is for mode versioned-upsert, and mode is insert-once (the default: is property mode missing or misspelt?)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.yaml")
			if err := os.WriteFile(path, []byte(head+c.split+c.out+streams), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := flux.Load(path, flux.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Build(ioRegistry(t, nil, 0))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Build: %v\nwant an error holding %q", err, c.want)
			}
		})
	}
}
