package orders

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/gale-stream/gale/sink"
	"github.com/gale-stream/gale/tuple"
)

// OrderLinesTable is the sink's table of decided lines: one row per event id, written
// once (a replayed event's row is a duplicate, ignored). Money columns ending in
// _milli are exact, in thousandths of a pound; unit_price is the same price in pounds,
// for reading.
var OrderLinesTable = sink.Table{
	Name: "order_lines",
	Columns: []string{
		"event_id", "invoice_no", "stock_code", "description", "quantity", "unit_price",
		"amount_milli", "customer_id", "country", "invoice_date", "decision",
		"cancellation", "negative_quantity", "unknown_customer", "large_amount",
		"stock", "stock_level",
	},
	Conflict: []string{"event_id"},
	Mode:     sink.InsertOnce,
}

// SummaryTable is one row per invoice, recomputed from order_lines in the transaction
// that wrote the invoice's lines (Summarize): its number of lines and total amount.
// version is the number of lines, which only grows, so a summary computed from fewer
// lines (an older or concurrent transaction) never overwrites one from more.
var SummaryTable = sink.Table{
	Name:     "invoice_summary",
	Columns:  []string{"invoice_no", "lines", "total_milli", "version"},
	Conflict: []string{"invoice_no"},
	Mode:     sink.VersionedUpsert,
	Version:  "version",
}

// Schema returns the statements that create the tables and index the pipeline writes
// (CREATE ... IF NOT EXISTS, so running them again is harmless), for SQLite or
// PostgreSQL: the same SQL serves both. Flags are 0/1 integers, which both store
// alike. To keep several pipelines apart on PostgreSQL, give each its own schema
// (search_path in the sink's URL).
func Schema(d sink.Dialect) []string {
	_ = d // one spelling fits both dialects today; the parameter keeps callers ready
	flag := func(name string) string {
		return fmt.Sprintf("%s INTEGER NOT NULL CHECK (%s IN (0, 1))", name, name)
	}
	return []string{
		`CREATE TABLE IF NOT EXISTS order_lines (
	event_id TEXT PRIMARY KEY,
	invoice_no TEXT NOT NULL,
	stock_code TEXT NOT NULL,
	description TEXT NOT NULL,
	quantity BIGINT NOT NULL,
	unit_price DOUBLE PRECISION NOT NULL,
	amount_milli BIGINT NOT NULL,
	customer_id BIGINT,
	country TEXT NOT NULL,
	invoice_date TEXT NOT NULL,
	decision TEXT NOT NULL,
	` + flag("cancellation") + `,
	` + flag("negative_quantity") + `,
	` + flag("unknown_customer") + `,
	` + flag("large_amount") + `,
	stock TEXT NOT NULL,
	stock_level BIGINT
)`,
		`CREATE INDEX IF NOT EXISTS order_lines_invoice_no ON order_lines (invoice_no)`,
		`CREATE TABLE IF NOT EXISTS invoice_summary (
	invoice_no TEXT PRIMARY KEY,
	lines BIGINT NOT NULL,
	total_milli BIGINT NOT NULL,
	version BIGINT NOT NULL
)`,
	}
}

// Rows is the sink's Rows function: the order_lines row of a decision tuple (fields
// DecisionFields), in OrderLinesTable's column order.
func Rows(t *tuple.Tuple) ([]sink.Row, error) {
	line, err := lineOf(t)
	if err != nil {
		return nil, err
	}
	l := &line
	flags, ok1 := t.ValueByField("flags").(uint8)
	verdict, ok2 := t.ValueByField("stock").(string)
	stockLevel, ok3 := t.ValueByField("stock_level").(int64)
	outcome, ok4 := t.ValueByField("decision").(string)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return nil, fmt.Errorf("orders: a tuple from %s is not a decision: flags %T, stock %T, stock_level %T, decision %T (want DecisionFields)",
			t.SourceComponent(), t.ValueByField("flags"), t.ValueByField("stock"), t.ValueByField("stock_level"), t.ValueByField("decision"))
	}
	amount, err := l.Amount()
	if err != nil {
		return nil, err
	}
	var customer, level any // NULL when the line has no customer, or no stock level
	if l.CustomerID != 0 {
		customer = l.CustomerID
	}
	if verdict != Unstocked {
		level = stockLevel
	}
	bit := func(f Flags) int64 {
		if Flags(flags).Has(f) {
			return 1
		}
		return 0
	}
	return []sink.Row{{Table: OrderLinesTable.Name, Values: []any{
		l.EventID, l.InvoiceNo, l.StockCode, l.Description, l.Quantity, float64(l.UnitPrice) / 1000,
		int64(amount), customer, l.Country, l.InvoiceDate, outcome,
		bit(Cancellation), bit(NegativeQuantity), bit(UnknownCustomer), bit(LargeAmount),
		verdict, level,
	}}}, nil
}

// summarizeChunk bounds the invoice numbers per query (SQLite allows 32,766 bind
// parameters, and a sink batch may be configured large).
const summarizeChunk = 500

// Summarize is the sink's After hook: inside the batch's transaction, for every
// invoice the batch's order_lines rows name, it counts the invoice's stored lines and
// sums their amounts, and upserts invoice_summary with version = the line count. The
// lines just inserted are visible to it (same transaction), so the summary always
// matches order_lines as committed.
func Summarize(ctx context.Context, tx *sql.Tx, d sink.Dialect, rows []sink.Row) error {
	col := slices.Index(OrderLinesTable.Columns, "invoice_no")
	var invoices []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Table != OrderLinesTable.Name {
			continue
		}
		inv := r.Values[col].(string)
		if !seen[inv] {
			seen[inv] = true
			invoices = append(invoices, inv)
		}
	}
	upsert, err := SummaryTable.Statement(d)
	if err != nil {
		return err
	}
	for len(invoices) > 0 {
		n := min(len(invoices), summarizeChunk)
		chunk := invoices[:n]
		invoices = invoices[n:]
		params := make([]string, len(chunk))
		args := make([]any, len(chunk))
		for i, inv := range chunk {
			params[i], args[i] = d.Placeholder(i+1), inv
		}
		q := `SELECT invoice_no, COUNT(*), CAST(SUM(amount_milli) AS BIGINT) FROM order_lines WHERE invoice_no IN (` +
			strings.Join(params, ", ") + `) GROUP BY invoice_no`
		res, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("summarize: %w", err)
		}
		type sum struct {
			inv          string
			lines, total int64
		}
		var sums []sum
		for res.Next() {
			var s sum
			if err := res.Scan(&s.inv, &s.lines, &s.total); err != nil {
				res.Close()
				return fmt.Errorf("summarize: %w", err)
			}
			sums = append(sums, s)
		}
		if err := res.Close(); err != nil {
			return fmt.Errorf("summarize: %w", err)
		}
		if err := res.Err(); err != nil {
			return fmt.Errorf("summarize: %w", err)
		}
		for _, s := range sums {
			if _, err := tx.ExecContext(ctx, upsert, s.inv, s.lines, s.total, s.lines); err != nil {
				return fmt.Errorf("summarize invoice %s: %w", s.inv, err)
			}
		}
	}
	return nil
}
