package cli

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The word count of built-ins (testdata/flux/words.yaml, gale.spout.Files,
// gale.bolt.Split, gale.bolt.Count).
const wordsFlux = "../../testdata/flux/words.yaml"

// writeWordsFilter writes a --filter file for words.yaml.
func writeWordsFilter(t *testing.T, dir, input, output string, failRate float64) string {
	t.Helper()
	filter := filepath.Join(dir, "words.properties")
	if err := os.WriteFile(filter, fmt.Appendf(nil, "input=%s\noutput=%s\nfailRate=%v\n", input, output, failRate), 0o644); err != nil {
		t.Fatal(err)
	}
	return filter
}

// gale run of the built-ins' word count to its natural end, split and count
// failing 3% of what they get: exit 0, the run ends by itself, and the counts file
// equals the book counted here independently (countBook).
func TestRunBuiltinWordCount(t *testing.T) {
	dir := t.TempDir()
	counts := filepath.Join(dir, "counts.tsv")
	filter := writeWordsFilter(t, dir, runBook, counts, 0.03)
	var out, errb bytes.Buffer
	if code := runWith([]string{"run", wordsFlux, "--filter", filter}, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "gale: stopping (every spout's input is done and every tree completed)") {
		t.Fatalf("the run did not end by itself:\n%s", errb.String())
	}
	got := readCounts(t, counts)
	want, lines := countBook(t, runBook)
	if !maps.Equal(got, want) {
		t.Fatalf("%d distinct words counted, want %d (the: %d, want %d)", len(got), len(want), got["the"], want["the"])
	}
	if !strings.Contains(errb.String(), fmt.Sprintf("spout lines: emitted %d, acked %d, failed", lines, lines)) && !strings.Contains(errb.String(), fmt.Sprintf(", acked %d, failed", lines)) {
		t.Fatalf("not every line acked once:\n%s", errb.String())
	}
	t.Logf("%d lines, %d distinct words (the: %d)", lines, len(want), want["the"])
}
