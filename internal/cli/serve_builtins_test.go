package cli

import (
	"database/sql"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"
)

// gale serve --pipeline over a file of built-ins only (testdata/flux/
// retail-latest.yaml: gale.bolt.Map parsing the payload with fromJSON,
// gale.bolt.Filter, gale.bolt.Key, gale.sink.Table in versioned upsert) takes the
// retail order lines with ack=processed: every event PROCESSED once, and the
// table holds, for each product, its last sale, equal to the reference computed
// here from the CSV files without gale.
func TestServePipelineFileOfBuiltins(t *testing.T) {
	c, dir, files, lines := serveFileWithRetail(t, "retail-latest.yaml", "latest_sale")
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	want := latestSales(t, files)
	db, err := sql.Open("sqlite", filepath.Join(dir, "sink.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT product, version, event_id, invoice_no, stock_code, quantity, unit_price_milli, country FROM latest_sale")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]latestSale{}
	for rows.Next() {
		var s latestSale
		if err := rows.Scan(&s.product, &s.version, &s.eventID, &s.invoice, &s.stock, &s.quantity, &s.priceMilli, &s.country); err != nil {
			t.Fatal(err)
		}
		got[s.product] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d products", len(got), len(want))
	}
	bad := 0
	for p, w := range want {
		if g, ok := got[p]; !ok || g != w {
			if bad++; bad <= 5 {
				t.Errorf("product %s: row %+v (present %t), want %+v", p, g, ok, w)
			}
		}
	}
	t.Logf("%d events, %d products", lines, len(want))
}

type latestSale struct {
	product, eventID, invoice, stock, country string
	version, quantity, priceMilli             int64
}

// latestSales is the reference: for each product (its stock code in upper case),
// the sale (a line of positive quantity) last in the files (by day, then row),
// read with encoding/csv.
func latestSales(t *testing.T, files []string) map[string]latestSale {
	t.Helper()
	out := map[string]latestSale{}
	for _, f := range files {
		day := strings.TrimSuffix(filepath.Base(f), ".csv")
		dayNum, err := strconv.ParseInt(strings.ReplaceAll(day, "-", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(r).ReadAll()
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs[1:] {
			row := i + 1
			q, err := strconv.ParseInt(rec[3], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			if q <= 0 {
				continue
			}
			s := latestSale{
				product: strings.ToUpper(strings.TrimSpace(rec[1])), version: dayNum*100000 + int64(row),
				eventID: fmt.Sprintf("%s:%d", day, row), invoice: rec[0], stock: rec[1], country: rec[7],
				quantity: q, priceMilli: decimalMilli(t, rec[5]),
			}
			if prev, ok := out[s.product]; !ok || s.version > prev.version {
				out[s.product] = s
			}
		}
	}
	return out
}

// decimalMilli is a decimal price ("2.55") in thousandths, from its digits.
func decimalMilli(t *testing.T, price string) int64 {
	whole, frac, _ := strings.Cut(price, ".")
	if len(frac) > 3 {
		t.Fatalf("price %q: more than 3 decimals", price)
	}
	n, err := strconv.ParseInt(whole+frac+strings.Repeat("0", 3-len(frac)), 10, 64)
	if err != nil {
		t.Fatalf("price %q: %v", price, err)
	}
	return n
}
