package main

import (
	"os"
	"strings"
	"testing"
)

// The main of docs/topologies.md's "Your binary with gale's commands" is this
// main.go, byte for byte: what a reader copies is what this test's binary runs.
func TestDocsQuoteMain(t *testing.T) {
	doc, err := os.ReadFile("../../docs/topologies.md")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Your binary with gale's commands\n")
	if !ok {
		t.Fatal(`docs/topologies.md has no "## Your binary with gale's commands" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, code, ok := strings.Cut(section, "\n```go\n")
	if ok {
		code, _, ok = strings.Cut(code, "\n```\n")
	}
	if !ok {
		t.Fatal("the section has no complete go code block")
	}
	if want := strings.TrimSuffix(string(main), "\n"); code != want {
		t.Errorf("docs/topologies.md's main differs from examples/wordlen/main.go:\n--- docs\n%s\n--- main.go\n%s", code, want)
	}
}
