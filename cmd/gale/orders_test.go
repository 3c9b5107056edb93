package main

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
	b, err := os.ReadFile("../../testdata/retail/2010-12-01.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfterN(string(b), "\n", n+2)
	file := filepath.Join(t.TempDir(), "2010-12-01.csv")
	if err := os.WriteFile(file, []byte(strings.Join(lines[:n+1], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestOrdersTempDirRemoved: without --data, gale orders works in a fresh
// gale-orders-* directory and removes it at the end, unless --keep is given.
func TestOrdersTempDirRemoved(t *testing.T) {
	file := smallRetail(t, 40)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	runOrdersCmd := func(args ...string) string {
		t.Helper()
		c := ordersCmd()
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
