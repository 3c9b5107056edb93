package flux_test

import (
	"errors"
	"fmt"
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
