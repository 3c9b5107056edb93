package topology_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocsQuoteExample: the "A topology in Go" code of docs/topologies.md is
// example_test.go, byte for byte, so the code a reader copies is the code
// Example_wordCount runs.
func TestDocsQuoteExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/topologies.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## A topology in Go\n")
	if !ok {
		t.Fatal(`docs/topologies.md has no "## A topology in Go" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, code, ok := strings.Cut(section, "\n```go\n")
	if ok {
		code, _, ok = strings.Cut(code, "\n```\n")
	}
	if !ok {
		t.Fatal(`the "A topology in Go" section has no complete go code block`)
	}
	if want := strings.TrimSuffix(string(example), "\n"); code != want {
		a, b := strings.Split(code, "\n"), strings.Split(want, "\n")
		for i := range max(len(a), len(b)) {
			if i >= len(a) || i >= len(b) || a[i] != b[i] {
				t.Fatalf("docs/topologies.md's code differs from topology/example_test.go at line %d of the block:\ndocs:    %q\nexample: %q",
					i+1, at(a, i), at(b, i))
			}
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end)"
}
