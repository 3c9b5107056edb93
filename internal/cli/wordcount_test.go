package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func runGale(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := WordcountCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

func TestWordcountJSONAndOut(t *testing.T) {
	outFile := filepath.Join(t.TempDir(), "counts.tsv")
	stdout, _, err := runGale(t, "--json", "--fail-rate", "0.05", "--seed", "3", "--top", "3", "--out", outFile, "../../testdata/books/105.txt")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout)
	}
	for _, k := range []string{"lines", "lines_acked", "replays", "words", "distinct_words", "words_per_second", "complete_latency_ms", "misuse_reports"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	lat := got["complete_latency_ms"].(map[string]any)
	if _, ok := lat["p50"]; !ok {
		t.Error("complete_latency_ms lacks p50")
	}
	if _, ok := lat["p99"]; !ok {
		t.Error("complete_latency_ms lacks p99")
	}
	if got["lines"] != got["lines_acked"] || got["misuse_reports"] != 0.0 || got["replays"] == 0.0 {
		t.Fatalf("lines %v acked %v misuse %v replays %v", got["lines"], got["lines_acked"], got["misuse_reports"], got["replays"])
	}
	if top := got["top"].([]any); len(top) != 3 || top[0].(map[string]any)["word"] != "the" {
		t.Fatalf("top: %v", top)
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var words []string
	var sum float64
	for _, l := range lines {
		w, c, ok := strings.Cut(l, "\t")
		n, err := strconv.Atoi(c)
		if !ok || err != nil || n < 1 || w == "" {
			t.Fatalf("bad line %q", l)
		}
		words = append(words, w)
		sum += float64(n)
	}
	if !sort.StringsAreSorted(words) || float64(len(words)) != got["distinct_words"] || sum != got["words"] {
		t.Fatalf("--out: sorted=%v, %d words (json %v), sum %v (json %v)", sort.StringsAreSorted(words), len(words), got["distinct_words"], sum, got["words"])
	}
}

func TestWordcountHumanSummaryDefaultBooks(t *testing.T) {
	wd, _ := os.Getwd()
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	stdout, _, err := runGale(t, "--top", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lines                  97,639", "acked                  97,639", "words                  931,978", "distinct words         21,664", "misuse reports         0", "top 2 words:", "1. the              38,523", "complete latency       p50 "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
}

func TestWordcountBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--fail-rate", "1.5", "../../testdata/books/105.txt"}, "--fail-rate 1.5: must be at least 0 and below 1"},
		{[]string{"/nonexistent.txt"}, "no such file"},
		{[]string{"../../testdata"}, "is a directory"},
		{[]string{"--ackers", "-1", "../../testdata/books/105.txt"}, "--ackers -1: must be >= 0"},
		{[]string{"--max-pending", "-5", "../../testdata/books/105.txt"}, "--max-pending -5: must be >= 0"},
		{[]string{"--timeout", "0s", "../../testdata/books/105.txt"}, "--timeout 0s: must be at least 1ms"},
		{[]string{"--timeout", "3ns", "../../testdata/books/105.txt"}, "--timeout 3ns: must be at least 1ms"},
		{[]string{"--fail-rate", "NaN", "../../testdata/books/105.txt"}, "--fail-rate NaN: must be at least 0 and below 1"},
		{[]string{"--fail-rate", "0.1", "--ackers", "0", "../../testdata/books/105.txt"}, "a fail rate needs acker tasks"},
		{[]string{"--top", "-1", "../../testdata/books/105.txt"}, "--top -1"},
	} {
		_, _, err := runGale(t, tc.args...)
		var ee ExitError
		if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}
