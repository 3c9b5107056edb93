package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallRetail writes the first n order lines of a real retail day to a CSV file.
func smallRetail(t *testing.T, n int) string {
	t.Helper()
	return retailHead(t, retailDay, n)
}

// retailHead writes the header and the first n order lines of the retail CSV
// file to a file of the same name in a temporary directory.
func retailHead(t *testing.T, from string, n int) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfterN(string(b), "\n", n+2)
	if len(lines) < n+2 {
		t.Fatalf("%s holds fewer than %d order lines", from, n)
	}
	file := filepath.Join(t.TempDir(), filepath.Base(from))
	if err := os.WriteFile(file, []byte(strings.Join(lines[:n+1], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// retailSample is the retail testdata the one-command tests ingest: the three
// days (7,419 order lines, 418 invoices), or under the race detector, whose serve
// is several times slower and CPU-bound on CI's two cores, the first 1,000 order
// lines of each day. What those tests assert holds line by line and invoice by
// invoice, and the three files still go through one run. lines and invoices are
// counted here from the files (an invoice is a distinct InvoiceNo, the first
// column), not by gale.
func retailSample(t *testing.T) (files []string, lines, invoices int) {
	t.Helper()
	files = retailFiles(t)
	if raceEnabled {
		for i, f := range files {
			files[i] = retailHead(t, f, 1000)
		}
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rows := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")[1:] // the header left out
		for _, r := range rows {
			no, _, _ := strings.Cut(r, ",")
			seen[no] = true
		}
		lines += len(rows)
	}
	return files, lines, len(seen)
}

// retailDaySample is the day TestServeJetStreamOneNode ingests: retailDay, or
// under the race detector its first 1,000 order lines (as retailSample); lines
// is how many order lines the file holds.
func retailDaySample(t *testing.T) (file string, lines int) {
	t.Helper()
	if raceEnabled {
		return retailHead(t, retailDay, 1000), 1000
	}
	return retailDay, retailDayLines
}

// TestOrdersTempDirRemoved: without --data, gale orders works in a fresh
// gale-orders-* directory and removes it at the end, unless --keep is given.
func TestOrdersTempDirRemoved(t *testing.T) {
	file := smallRetail(t, 40)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	runOrdersCmd := func(args ...string) string {
		t.Helper()
		c := OrdersCmd()
		var out bytes.Buffer
		c.SetOut(&out)
		c.SetErr(&out)
		c.SetArgs(append(args, file))
		if err := c.Execute(); err != nil {
			t.Fatalf("gale orders %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	out := runOrdersCmd()
	if !strings.Contains(out, "PROCESSED         40") {
		t.Fatalf("report:\n%s", out)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "gale-orders-*")); len(left) != 0 {
		t.Fatalf("left behind: %v\n%s", left, out)
	}
	if !strings.Contains(out, "removed (--keep keeps it)") {
		t.Errorf("the report does not say the directory was removed:\n%s", out)
	}
	out = runOrdersCmd("--keep")
	left, _ := filepath.Glob(filepath.Join(tmp, "gale-orders-*"))
	if len(left) != 1 || !strings.Contains(out, "data directory: "+left[0]+" (kept)") {
		t.Fatalf("--keep: %v\n%s", left, out)
	}
	if _, err := os.Stat(filepath.Join(left[0], "log")); err != nil {
		t.Errorf("--keep kept no log: %v", err)
	}
}
