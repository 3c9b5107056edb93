package sink

import (
	"fmt"
	"strings"
	"testing"
)

func TestStatement(t *testing.T) {
	for _, c := range []struct {
		t                Table
		sqlite, postgres string
	}{
		{
			eventsTable,
			`INSERT INTO "events" ("event_id", "source", "type", "payload") VALUES (?, ?, ?, ?) ON CONFLICT ("event_id") DO NOTHING`,
			`INSERT INTO "events" ("event_id", "source", "type", "payload") VALUES ($1, $2, $3, $4) ON CONFLICT ("event_id") DO NOTHING`,
		},
		{
			entitiesTable,
			`INSERT INTO "entities" AS cur ("entity_key", "version", "event_id", "payload") VALUES (?, ?, ?, ?) ON CONFLICT ("entity_key") DO UPDATE SET "version" = excluded."version", "event_id" = excluded."event_id", "payload" = excluded."payload" WHERE excluded."version" > cur."version"`,
			`INSERT INTO "entities" AS cur ("entity_key", "version", "event_id", "payload") VALUES ($1, $2, $3, $4) ON CONFLICT ("entity_key") DO UPDATE SET "version" = excluded."version", "event_id" = excluded."event_id", "payload" = excluded."payload" WHERE excluded."version" > cur."version"`,
		},
		{
			Table{Name: `audit.Odd"Name`, Columns: []string{"a", "b", "v"}, Conflict: []string{"b", "a"}, Mode: VersionedUpsert, Version: "v"},
			`INSERT INTO "audit"."Odd""Name" AS cur ("a", "b", "v") VALUES (?, ?, ?) ON CONFLICT ("b", "a") DO UPDATE SET "v" = excluded."v" WHERE excluded."v" > cur."v"`,
			`INSERT INTO "audit"."Odd""Name" AS cur ("a", "b", "v") VALUES ($1, $2, $3) ON CONFLICT ("b", "a") DO UPDATE SET "v" = excluded."v" WHERE excluded."v" > cur."v"`,
		},
	} {
		got, err := c.t.Statement(SQLite)
		if err != nil {
			t.Fatal(err)
		}
		eq(t, c.t.Name+" sqlite", got, c.sqlite)
		if got, err = c.t.Statement(Postgres); err != nil {
			t.Fatal(err)
		}
		eq(t, c.t.Name+" postgres", got, c.postgres)
	}
	if _, err := eventsTable.Statement(Dialect(7)); err == nil || !strings.Contains(err.Error(), "unknown dialect") {
		t.Errorf("unknown dialect: %v", err)
	}
}

func TestTableValidate(t *testing.T) {
	ok := Table{Name: "t", Columns: []string{"id", "v", "x"}, Conflict: []string{"id"}, Mode: VersionedUpsert, Version: "v"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		change func(t *Table)
		want   string
	}{
		{func(t *Table) { t.Name = "" }, "name: empty"},
		{func(t *Table) { t.Name = "a..b" }, `"a..b" has an empty part`},
		{func(t *Table) { t.Columns = nil; t.Conflict = nil }, "no columns"},
		{func(t *Table) { t.Columns = []string{"id", "v", "id"} }, `column "id" listed twice`},
		{func(t *Table) { t.Columns = []string{"id", "v", "x\x00"} }, "column 2: contains a NUL byte"},
		{func(t *Table) { t.Conflict = nil }, "no conflict columns"},
		{func(t *Table) { t.Conflict = []string{"nope"} }, `conflict column "nope" is not one of the columns [id v x]`},
		{func(t *Table) { t.Conflict = []string{"id", "id"} }, `conflict column "id" listed twice`},
		{func(t *Table) { t.Mode = 0 }, "unknown mode Mode(0)"},
		{func(t *Table) { t.Mode = 9 }, "unknown mode Mode(9)"},
		{func(t *Table) { t.Version = "" }, "mode VersionedUpsert needs a version column"},
		{func(t *Table) { t.Version = "w" }, `version column "w" is not one of the columns`},
		{func(t *Table) { t.Conflict = []string{"id", "v"} }, `version column "v" is also a conflict column`},
		{func(t *Table) { t.Mode = InsertOnce }, `mode InsertOnce takes no version column (got "v")`},
	} {
		tb := ok
		tb.Columns = append([]string(nil), ok.Columns...)
		tb.Conflict = append([]string(nil), ok.Conflict...)
		c.change(&tb)
		err := tb.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "sink: table ") {
			t.Errorf("%+v: Validate = %v, want an error saying %q", tb, err, c.want)
		}
	}
}

func TestNewBoltValidatesOptions(t *testing.T) {
	db := mustOpen(t, "sqlite:"+t.TempDir()+"/o.db")
	defer db.Close()
	good := Options{DB: db, Tables: []Table{eventsTable}, Rows: recordRows}
	if _, err := NewBolt(good); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		change func(o *Options)
		want   string
	}{
		{func(o *Options) { o.DB = nil }, "no DB"},
		{func(o *Options) { o.DB = &DB{} }, "no DB"},
		{func(o *Options) { o.Rows = nil }, "no Rows function"},
		{func(o *Options) { o.Tables = nil }, "no tables"},
		{func(o *Options) { o.Tables = []Table{eventsTable, eventsTable} }, `table "events" listed twice`},
		{func(o *Options) { o.Tables = []Table{{Name: "x", Columns: []string{"a"}, Conflict: []string{"a"}}} }, "unknown mode"},
		{func(o *Options) { o.BatchRows = -1 }, "BatchRows -1 is negative"},
		{func(o *Options) { o.BatchDelay = -1 }, "BatchDelay -1ns is negative"},
		{func(o *Options) { o.FlushTimeout = -1 }, "FlushTimeout -1ns is negative"},
	} {
		o := good
		c.change(&o)
		if _, err := NewBolt(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewBolt: %v, want an error saying %q", err, c.want)
		}
	}
}

// Rows run by table (in Options.Tables order), then key; equal keys keep input order.
func TestLockOrder(t *testing.T) {
	db := mustOpen(t, "sqlite:"+t.TempDir()+"/l.db")
	defer db.Close()
	b, _ := newTestBolt(t, Options{DB: db, Tables: []Table{eventsTable, entitiesTable}, Rows: recordRows})
	rows := []Row{
		{Table: "entities", Values: []any{"k2", int64(1), "a", ""}},
		{Table: "events", Values: []any{"e1", "first", "", ""}},
		{Table: "entities", Values: []any{"k1", int64(5), "b", ""}},
		{Table: "events", Values: []any{"e0", "", "", ""}},
		{Table: "events", Values: []any{"e1", "second", "", ""}},
		{Table: "entities", Values: []any{"k1", int64(2), "c", ""}},
	}
	got := fmt.Sprint(b.lockOrder(rows))
	eq(t, "order", got, "[3 1 4 2 5 0]")
}
