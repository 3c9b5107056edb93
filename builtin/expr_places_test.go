package builtin_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gale-stream/gale/flux"
)

// A bad expression is refused at the character at fault in the file, whatever
// comes before it on its line or in its value: each place below was counted by
// hand in the file's text (columns in characters).
func TestExprRefusedAtEveryKindOfPlace(t *testing.T) {
	reg := exprRegistry(t)
	const filter, mapc = "gale.bolt.Filter", "gale.bolt.Map"
	expr := func(v string) string { return "      - name: expr\n        value: " + v + "\n" }
	fields := func(v string) string { return "      - name: fields\n        value:" + v + "\n" }
	for _, c := range []struct {
		name, class, props string
		crlf               bool
		at, msg            string
	}{
		{"the first character", filter, expr(")quantity > 0"), false, "f.yaml:10:16: ", `unexpected token Bracket(")")`},
		{"the last character", filter, expr("quantity > 0)"), false, "f.yaml:10:28: ", `unexpected token Bracket(")")`},
		{"after multi-byte characters", filter, expr("order == 'é€😀' && quantity >> 1"), false, "f.yaml:10:44: ", `unexpected token Operator(">")`},
		{"a multi-byte character", filter, expr(`"é\u00e9\U0001F600 colour"`), false, "f.yaml:10:24: ", "unrecognized character: U+1F600"},
		{"after escapes", filter, expr(`"order == '\u00e9\t\x41' && colour"`), false, "f.yaml:10:44: ", "unknown name colour"},
		{"the end of a double-quoted value", filter, expr(`"order == '\\' && colour"`), false, "f.yaml:10:40: ", "literal not terminated"},
		{"after an escaped line break", filter, expr("\"order == 'a\\\n    b' && colour\""), false, "f.yaml:11:11: ", "unknown name colour"},
		{"a literal block, more indented", filter, expr("|\n            quantity > 0 &&\n              colour"), false, "f.yaml:12:15: ", "unknown name colour"},
		{"a literal block, explicit indentation", filter, expr("|2\n            quantity > 0 &&\n              colour"), false, "f.yaml:12:15: ", "unknown name colour"},
		{"a folded block, after a blank line", filter, expr(">-\n            quantity > 0 &&\n\n            colour"), false, "f.yaml:13:13: ", "unknown name colour"},
		{"the end of a literal block", filter, expr("|\n          quantity > 0 &&"), false, "f.yaml:11:26: ", "unexpected token EOF"},
		{"a # inside a block", filter, expr("|\n          quantity > 0 && 'é\tx' == colour   # not a comment"), false, "f.yaml:11:45: ", `unexpected token Operator("#")`},
		{"a flow mapping", filter, "      - {name: expr, value: quantity > 0 && colour}\n", false, "f.yaml:9:45: ", "unknown name colour"},
		{"a tag, the value on the next line", filter, expr("!!str\n          quantity > colour"), false, "f.yaml:11:22: ", "unknown name colour"},
		{"an anchor and a tag", filter, expr(`&x !!str "quantity > colour"`), false, "f.yaml:10:37: ", "unknown name colour"},
		{"a tagged block", filter, expr("!!str |\n          quantity > colour"), false, "f.yaml:11:22: ", "unknown name colour"},
		{"CRLF lines, plain", filter, expr("order == 'ä' ||\n          colour"), true, "f.yaml:11:11: ", "unknown name colour"},
		{"CRLF lines, a block", filter, expr("|\n          order == 'ä' ||\n            colour"), true, "f.yaml:12:13: ", "unknown name colour"},
		{"a map's flow list over lines", mapc, fields(" [{order: order},\n                {qty: quantity *},\n        ]"), false, "f.yaml:11:32: ", "unexpected token EOF"},
		{"a map's complex key", mapc, fields("\n          - order: order\n          - ? qty\n            : quantity + colour"), false, "f.yaml:13:26: ", "unknown name colour"},
		{"a map's anchored expression", mapc, fields("\n          - qty: &q quantity + colour\n          - q2: *q"), false, "f.yaml:11:32: ", "unknown name colour"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := exprFile(c.class, c.props)
			if c.crlf {
				text = strings.ReplaceAll(text, "\n", "\r\n")
			}
			_, err := exprBuild(t, reg, text)
			if err == nil || !strings.HasPrefix(err.Error(), c.at) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got\n%v\nwant at %q, saying %q", err, c.at, c.msg)
			}
		})
	}
	// On a line with a ${substitution}: the file's column, not the substituted text's.
	dir := t.TempDir()
	props, path := filepath.Join(dir, "p.properties"), filepath.Join(dir, "f.yaml")
	if err := os.WriteFile(props, []byte("min=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(exprFile(filter, expr("quantity > ${min} && colour"))), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := flux.Load(path, flux.Options{Filter: props})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Build(reg)
	if want := path + ":10:37: "; err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "unknown name colour") {
		t.Errorf("after a substitution: got\n%v\nwant at %q", err, want)
	}
}
