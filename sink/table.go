package sink

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mode is how a table takes a row whose conflict key is already stored.
type Mode int

const (
	// InsertOnce keeps the first row per conflict key and ignores later ones:
	//
	//	INSERT INTO t (cols) VALUES (...) ON CONFLICT (conflict) DO NOTHING
	//
	// It is seed 004's idempotent insert: a replayed or retried event (same event id)
	// writes nothing the second time, and is counted as a duplicate.
	InsertOnce Mode = iota + 1
	// VersionedUpsert keeps, per conflict key, the row with the highest version:
	//
	//	INSERT INTO t AS cur (cols) VALUES (...) ON CONFLICT (conflict)
	//	DO UPDATE SET c = excluded.c, ... WHERE excluded.version > cur.version
	//
	// An update applies only if its version is strictly newer than the stored one, so
	// rows arriving out of order (or replayed) leave the newest version in place; a row
	// not applied is counted as stale.
	VersionedUpsert
)

func (m Mode) String() string {
	switch m {
	case InsertOnce:
		return "InsertOnce"
	case VersionedUpsert:
		return "VersionedUpsert"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// Table describes one table the sink writes. The table must already exist, with a
// PRIMARY KEY or UNIQUE constraint on exactly the Conflict columns (ON CONFLICT needs
// one). Names are quoted as written ("Name" stays case-sensitive), so spell them as the
// database stores them: lower case for tables created in PostgreSQL without quotes. A
// Name with a dot is schema-qualified ("audit.events").
type Table struct {
	// Name is the table, optionally "schema.table".
	Name string
	// Columns are the columns every Row for this table gives values for, in order.
	Columns []string
	// Conflict are the key columns of the ON CONFLICT clause, each one of Columns.
	Conflict []string
	// Mode is InsertOnce or VersionedUpsert (the zero Mode is refused).
	Mode Mode
	// Version is VersionedUpsert's version column, one of Columns and not of Conflict;
	// its values must be non-NULL and comparable with > in SQL (an integer, usually).
	// InsertOnce takes none.
	Version string
}

// Validate checks the table: a name, columns without duplicates, conflict columns
// among the columns, a known mode, and a version column exactly when the mode needs
// one. The error names the table and what is wrong.
func (t Table) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("sink: table %q: %s", t.Name, fmt.Sprintf(format, args...))
	}
	if err := checkName(t.Name, true); err != nil {
		return bad("name: %v", err)
	}
	if len(t.Columns) == 0 {
		return bad("no columns")
	}
	for i, c := range t.Columns {
		if err := checkName(c, false); err != nil {
			return bad("column %d: %v", i, err)
		}
		if slices.Index(t.Columns, c) != i {
			return bad("column %q listed twice", c)
		}
	}
	if len(t.Conflict) == 0 {
		return bad("no conflict columns (ON CONFLICT needs the key the table is unique on)")
	}
	for i, c := range t.Conflict {
		if !slices.Contains(t.Columns, c) {
			return bad("conflict column %q is not one of the columns %v", c, t.Columns)
		}
		if slices.Index(t.Conflict, c) != i {
			return bad("conflict column %q listed twice", c)
		}
	}
	switch t.Mode {
	case InsertOnce:
		if t.Version != "" {
			return bad("mode InsertOnce takes no version column (got %q); use VersionedUpsert", t.Version)
		}
	case VersionedUpsert:
		switch {
		case t.Version == "":
			return bad("mode VersionedUpsert needs a version column")
		case !slices.Contains(t.Columns, t.Version):
			return bad("version column %q is not one of the columns %v", t.Version, t.Columns)
		case slices.Contains(t.Conflict, t.Version):
			return bad("version column %q is also a conflict column: every version would be a new row", t.Version)
		}
	default:
		return bad("unknown mode %v (use InsertOnce or VersionedUpsert)", t.Mode)
	}
	return nil
}

// checkName refuses names no quoting can carry.
func checkName(name string, qualified bool) error {
	if name == "" {
		return errors.New("empty")
	}
	if strings.ContainsRune(name, 0) {
		return errors.New("contains a NUL byte")
	}
	if qualified {
		for part := range strings.SplitSeq(name, ".") {
			if part == "" {
				return fmt.Errorf("%q has an empty part", name)
			}
		}
	}
	return nil
}

// quoteIdent quotes one identifier for both dialects (double quotes, doubled inside).
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// quoteTable quotes a table name, each dot-separated part apart.
func quoteTable(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = quoteIdent(p)
	}
	return strings.Join(parts, ".")
}

// Statement returns the statement the sink runs for each row of t in dialect d, its
// placeholders bound to a Row's Values in Columns order. It is the same SQL in both
// dialects but for the placeholders; see InsertOnce and VersionedUpsert.
func (t Table) Statement(d Dialect) (string, error) {
	if err := t.Validate(); err != nil {
		return "", err
	}
	if d != SQLite && d != Postgres {
		return "", fmt.Errorf("sink: table %q: unknown dialect %v", t.Name, d)
	}
	cols := make([]string, len(t.Columns))
	params := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = quoteIdent(c)
		params[i] = d.Placeholder(i + 1)
	}
	conflict := make([]string, len(t.Conflict))
	for i, c := range t.Conflict {
		conflict[i] = quoteIdent(c)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(quoteTable(t.Name))
	if t.Mode == VersionedUpsert {
		// The alias names the stored row in the WHERE clause, schema-qualified or not.
		b.WriteString(" AS cur")
	}
	fmt.Fprintf(&b, " (%s) VALUES (%s) ON CONFLICT (%s)", strings.Join(cols, ", "), strings.Join(params, ", "), strings.Join(conflict, ", "))
	if t.Mode == InsertOnce {
		b.WriteString(" DO NOTHING")
		return b.String(), nil
	}
	var set []string
	for _, c := range t.Columns {
		if !slices.Contains(t.Conflict, c) {
			set = append(set, quoteIdent(c)+" = excluded."+quoteIdent(c))
		}
	}
	v := quoteIdent(t.Version)
	fmt.Fprintf(&b, " DO UPDATE SET %s WHERE excluded.%s > cur.%s", strings.Join(set, ", "), v, v)
	return b.String(), nil
}
