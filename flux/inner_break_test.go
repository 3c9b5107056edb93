package flux_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
)

// A place inside a value whose node has properties, a tag (!!str, the YAML way to
// keep true or 3 a string) or an anchor (&a, to reuse an expression), is found
// after them, in each style: the node's position is its first property's, and a
// tag is a bit of its style.
func TestSpecErrorInsideATaggedValue(t *testing.T) {
	reg := inputsRegistry(t, map[string][]component.Input{})
	for _, c := range []struct {
		name, value string
		at          int // 1 + the byte offset in the string: 'd', 5 in "abc def" and "ab\ncdef"
		want        string
	}{
		{"tagged plain", "value: !!str abc def", 5, "f.yaml:10:26: "},
		{"anchored plain", "value: &a abc def", 5, "f.yaml:10:23: "},
		{"tagged plain, its end", "value: !!str abc def", 8, "f.yaml:10:29: "},
		{"anchored and tagged double-quoted", `value: &a !!str "a\tb def"`, 5, "f.yaml:10:31: "},
		{"tagged single-quoted", `value: !!str 'it''s def'`, 4, "f.yaml:10:27: "},
		{"tag, then the value on the next line", "value: !!str # a string\n          abc def", 5, "f.yaml:11:15: "},
		{"tagged literal", "value: !!str |\n          ab\n          cdef", 5, "f.yaml:12:12: "},
		{"anchored folded", "value: &e >\n          ab\n\n          cdef", 5, "f.yaml:13:12: "},
		{"tagged double-quoted, its end", `value: !!str "abc"`, 4, "f.yaml:10:26: "},
		{"a verbatim tag", "value: !<tag:yaml.org,2002:str> abc def", 5, "f.yaml:10:45: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := `name: t
spouts:
  - id: s
    className: t.Spout
bolts:
  - id: x
    className: t.Refuse
    properties:
      - name: expr
        ` + c.value + `
      - {name: at, value: ` + fmt.Sprint(c.at) + `}
      - {name: path, value: []}
streams:
  - {from: s, to: x, grouping: {type: SHUFFLE}}
`
			f, err := flux.Parse("f.yaml", []byte(text))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Build(reg)
			var fe *flux.Error
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("got %v, want at %q", err, c.want)
			}
		})
	}
}

// On a line with a ${substitution}, a place inside a value is the file's column,
// not the substituted text's: after the variable it moves by what the substitution
// changed, and inside the substituted text it is the variable's ${. So is a
// value's own place after a substitution on its line, and a variable with no value
// is at its column in characters.
func TestSpecErrorInsideASubstitutedLine(t *testing.T) {
	reg := inputsRegistry(t, map[string][]component.Input{})
	dir := t.TempDir()
	props := filepath.Join(dir, "p.properties")
	if err := os.WriteFile(props, []byte("short=x\nlong=a longer text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, value string
		at          int
		want        string
	}{
		// "abc x def": 'd' is byte 6
		{"after a shorter value", "value: abc ${short} def", 7, "f.yaml:10:29: "},
		// "abc a longer text def": 'd' is byte 18
		{"after a longer value", "value: abc ${long} def", 19, "f.yaml:10:28: "},
		{"inside the value", "value: abc ${long} def", 7, "f.yaml:10:20: "},
		{"after two", "value: \"${short}é${long}\\td\"", 18, "f.yaml:10:35: "},                                // "xéa longer text\td": 'd' is byte 17
		{"in a block, on the variable's line", "value: |\n          ${long} ${short}y", 16, "f.yaml:11:27: "}, // "a longer text xy\n"
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "f.yaml")
			text := `name: t
spouts:
  - id: s
    className: t.Spout
bolts:
  - id: x
    className: t.Refuse
    properties:
      - name: expr
        ` + c.value + `
      - {name: at, value: ` + fmt.Sprint(c.at) + `}
      - {name: path, value: []}
streams:
  - {from: s, to: x, grouping: {type: SHUFFLE}}
`
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := flux.Load(path, flux.Options{Filter: props})
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Build(reg)
			if err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, c.want)) {
				t.Errorf("got %v, want at %q", err, c.want)
			}
		})
	}
	path := filepath.Join(dir, "g.yaml")
	if err := os.WriteFile(path, []byte("name: t\nspouts:\n  - {id: ${long}, className: ${short}é${none}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := flux.Load(path, flux.Options{Filter: props})
	if want := path + `:3:39: ${none}: the --filter file has no property "none"`; err == nil || err.Error() != want {
		t.Errorf("a variable with no value after é: got\n%v\nwant\n%s", err, want)
	}
	if err := os.WriteFile(path, []byte("name: t\nspouts:\n  - {id: ${long}, className: ${short}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{Filter: props})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Build(reg)
	if want := path + `:3:30: `; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("an unknown class after a substitution: got\n%v\nwant at %s", err, want)
	}
}
