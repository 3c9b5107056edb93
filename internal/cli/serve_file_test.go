package cli

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/gale-stream/gale/ingest"
)

// serveFileWithRetail starts gale serve --pipeline testdata/flux/FILE, its
// ${table} given by a filter file, and sends it the retail sample with the
// default ack level, processed: every line must be PROCESSED once.
func serveFileWithRetail(t *testing.T, file, table string) (c *child, dir string, files []string, lines int) {
	t.Helper()
	dir = t.TempDir()
	props := filepath.Join(dir, "table.properties")
	if err := os.WriteFile(props, []byte("table: "+table+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c = startChild(t, "serve", "--data", dir, "--addr", freeAddr(t), "--log-level", "warn",
		"--pipeline", "../../testdata/flux/"+file, "--filter", props)
	files, lines, _ = retailSample(t)
	in, err := OpenInputs(files)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := ingest.DefaultSendOptions()
	if o.Level != ingest.LevelProcessed {
		t.Fatalf("the default ack level is %v; these tests want processed", o.Level)
	}
	rep, err := RunIngest(ctx, &ingest.Client{URL: c.url}, in, o, NewIngestProgress(nil, "test"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sent != lines || rep.Final["PROCESSED"] != lines || len(rep.Final) != 1 || rep.Duplicates != 0 {
		t.Fatalf("report %+v; want all %d lines PROCESSED once", rep, lines)
	}
	return c, dir, files, lines
}

// gale serve --pipeline FILE.yaml: a Storm Flux file of the orders parse bolt
// and gale's table sink takes the retail order lines with ack=processed: every
// event PROCESSED, one row each, and a resend of each answered as a duplicate
// with no second row.
func TestServePipelineFile(t *testing.T) {
	c, dir, files, lines := serveFileWithRetail(t, "order-lines.yaml", "order_lines_file")
	// Again: every event a duplicate, nothing written.
	in, err := OpenInputs(files)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := RunIngest(ctx, &ingest.Client{URL: c.url}, in, ingest.DefaultSendOptions(), NewIngestProgress(nil, "test"))
	if err != nil || rep.Final["PROCESSED"] != lines || rep.Duplicates != lines {
		t.Fatalf("resend: %+v, %v; want %d PROCESSED duplicates", rep, err, lines)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "sink.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, ids int
	if err := db.QueryRow("SELECT count(*), count(DISTINCT event_id) FROM order_lines_file").Scan(&rows, &ids); err != nil {
		t.Fatal(err)
	}
	if rows != lines || ids != lines {
		t.Errorf("sink: %d rows, %d distinct event ids; want %d each", rows, ids, lines)
	}
}

// A pipeline file gale refuses is refused before anything starts: exit 2, its
// FILE:LINE:COLUMN and reason, and nothing made in --data.
func TestServePipelineFileRefused(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"unknown class", "name: p\nbolts:\n  - id: sink\n    className: gale.sink.Tabel\nstreams:\n  - from: log\n    to: sink\n    grouping: {type: SHUFFLE}\n",
			"p.yaml:4:16: "},
		{"a spout", "name: p\nspouts:\n  - id: s\n    className: gale.orders.Parse\nbolts:\n  - id: parse\n    className: gale.orders.Parse\nstreams:\n  - from: log\n    to: parse\n    grouping: {type: SHUFFLE}\n",
			"p.yaml:"},
		{"no sink", "name: p\nbolts:\n  - id: parse\n    className: gale.orders.Parse\nstreams:\n  - from: log\n    to: parse\n    grouping: {type: SHUFFLE}\n",
			"p.yaml:"},
		{"a bad expression", "name: p\nbolts:\n  - id: sales\n    className: gale.bolt.Filter\n    properties:\n      - name: expr\n        value: quantity > 0\n  - id: sink\n    className: gale.sink.Table\nstreams:\n  - from: log\n    to: sales\n    grouping: {type: SHUFFLE}\n  - from: sales\n    to: sink\n    grouping: {type: SHUFFLE}\n",
			"p.yaml:7:16: component \"sales\" (class \"gale.bolt.Filter\"): invalid spec: property expr: expression \"quantity > 0\", at its 1:1: unknown name quantity"},
		{"sink without its table", "name: p\nbolts:\n  - id: sink\n    className: gale.sink.Table\nstreams:\n  - from: log\n    to: sink\n    grouping: {type: SHUFFLE}\n",
			"p.yaml:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "p.yaml")
			if err := os.WriteFile(file, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, "data")
			out, errs, code := galeRun(t, "serve", "--data", data, "--addr", "127.0.0.1:0", "--pipeline", file)
			if code != 2 || !strings.Contains(errs, c.want) || out != "" {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, c.want)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("--data %s was made (%v): the file must be refused before anything starts", data, err)
			}
			t.Logf("%s", strings.TrimSpace(errs))
		})
	}
}
