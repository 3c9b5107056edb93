package orders

import (
	"encoding/csv"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gale-stream/gale/event"
)

// retailFiles are the three test days, in stream order.
var retailFiles = []string{"2010-12-01.csv", "2010-12-02.csv", "2010-12-03.csv"}

func retailPath(name string) string { return filepath.Join("..", "..", "testdata", "retail", name) }

var retail struct {
	once sync.Once
	evs  []event.Event
	err  error
}

// readRetail returns the events of every test day, in file order (read once; the
// payloads are shared and must not be modified).
func readRetail(t testing.TB) []event.Event {
	t.Helper()
	retail.once.Do(func() {
		for _, name := range retailFiles {
			f, err := os.Open(retailPath(name))
			if err != nil {
				retail.err = err
				return
			}
			evs, err := ReadCSV(f, f.Name())
			f.Close()
			if err != nil {
				retail.err = err
				return
			}
			retail.evs = append(retail.evs, evs...)
		}
	})
	if retail.err != nil {
		t.Fatal(retail.err)
	}
	return slices.Clone(retail.evs) // a copy: a test may reorder or splice its own
}

// Row counts per file (testdata/retail/SOURCE.md), the id format, and that identical
// rows stay distinct events.
func TestReadCSVRetailFiles(t *testing.T) {
	want := map[string]int{"2010-12-01.csv": 3108, "2010-12-02.csv": 2109, "2010-12-03.csv": 2202}
	ids := map[string]bool{}
	payloads := map[string]int{}
	for _, name := range retailFiles {
		f, err := os.Open(retailPath(name))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := ReadCSV(f, f.Name())
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != want[name] {
			t.Errorf("%s: %d events, want %d", name, len(evs), want[name])
		}
		day := strings.TrimSuffix(name, ".csv")
		for i, e := range evs {
			if wantID := day + ":" + strconv.Itoa(i+1); e.ID != wantID {
				t.Fatalf("%s event %d: id %q, want %q", name, i, e.ID, wantID)
			}
			if e.Source != "retail" || e.Type != "order_line" || e.Version != nil {
				t.Fatalf("event %s: source %q type %q version %v", e.ID, e.Source, e.Type, e.Version)
			}
			if err := e.Validate(); err != nil {
				t.Fatalf("event %s: %v", e.ID, err)
			}
			ids[e.ID] = true
			payloads[string(e.Payload)]++
		}
	}
	if len(ids) != 7419 {
		t.Errorf("%d distinct ids, want 7419", len(ids))
	}
	// 102 rows are exact copies of another (SOURCE.md): 7,317 distinct payloads.
	if len(payloads) != 7419-102 {
		t.Errorf("%d distinct payloads, want %d", len(payloads), 7419-102)
	}
}

// Known rows, byte for byte: the first row, a quoted description with an escaped
// quote, and a stock adjustment with no customer and no description.
func TestReadCSVPayloads(t *testing.T) {
	evs := readRetail(t)
	byID := map[string]event.Event{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	for _, tc := range []struct{ id, key, payload string }{
		{"2010-12-01:1", "536365", `{"invoice_no":"536365","stock_code":"85123A","description":"WHITE HANGING HEART T-LIGHT HOLDER","quantity":6,"invoice_date":"2010-12-01 08:26:00","unit_price":2.55,"customer_id":17850,"country":"United Kingdom"}`},
		// CSV line: 536477,22041,"RECORD FRAME 7"" SINGLE SIZE ",48,...
		{"2010-12-01:872", "536477", `{"invoice_no":"536477","stock_code":"22041","description":"RECORD FRAME 7\" SINGLE SIZE ","quantity":48,"invoice_date":"2010-12-01 12:27:00","unit_price":2.1,"customer_id":16210,"country":"United Kingdom"}`},
		{"2010-12-01:2407", "536589", `{"invoice_no":"536589","stock_code":"21777","description":"","quantity":-10,"invoice_date":"2010-12-01 16:50:00","unit_price":0.0,"customer_id":null,"country":"United Kingdom"}`},
		{"2010-12-01:142", "C536379", `{"invoice_no":"C536379","stock_code":"D","description":"Discount","quantity":-1,"invoice_date":"2010-12-01 09:41:00","unit_price":27.5,"customer_id":14527,"country":"United Kingdom"}`},
	} {
		e, ok := byID[tc.id]
		if !ok {
			t.Fatalf("no event %s", tc.id)
		}
		if e.Key != tc.key || string(e.Payload) != tc.payload {
			t.Errorf("%s: key %q payload\n%s\nwant key %q payload\n%s", tc.id, e.Key, e.Payload, tc.key, tc.payload)
		}
	}
}

// The dataset's properties (SOURCE.md), counted on decoded lines: this checks ReadCSV
// and DecodeLine together against numbers measured with other tools.
func TestRetailProperties(t *testing.T) {
	var cancel, negative, noCustomer, large int
	for _, e := range readRetail(t) {
		l, err := DecodeLine(e.ID, e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		f := Assess(&l, DefaultLargeAmount)
		for _, c := range []struct {
			flag Flags
			n    *int
		}{{Cancellation, &cancel}, {NegativeQuantity, &negative}, {UnknownCustomer, &noCustomer}, {LargeAmount, &large}} {
			if f.Has(c.flag) {
				*c.n++
			}
		}
	}
	if cancel != 84 || negative != 114 || noCustomer != 2290 || large != 28 {
		t.Errorf("cancellations %d (want 84), negative quantities %d (114), no customer %d (2290), above £500 %d (28)", cancel, negative, noCustomer, large)
	}
}

// A malformed row stops the scan with an error naming the file and the line.
func TestReadCSVMalformed(t *testing.T) {
	head := strings.Join(Header, ",") + "\n"
	good := "536365,85123A,WHITE HANGING HEART T-LIGHT HOLDER,6,2010-12-01 08:26:00,2.55,17850.0,United Kingdom\n"
	for _, tc := range []struct{ name, in, want string }{
		{"quantity", head + good + "536365,71053,LANTERN,six,2010-12-01 08:26:00,3.39,17850.0,United Kingdom\n", `x.csv line 3: Quantity "six": not an integer`},
		{"price", head + "536365,71053,LANTERN,6,2010-12-01 08:26:00,3.3925,17850.0,United Kingdom\n", `x.csv line 2: UnitPrice: price "3.3925": more than 3 decimals`},
		{"exponent", head + "536365,71053,LANTERN,6,2010-12-01 08:26:00,3e2,17850.0,United Kingdom\n", `x.csv line 2: UnitPrice: price "3e2": not a plain decimal`},
		{"customer", head + good + good + "536365,71053,LANTERN,6,2010-12-01 08:26:00,3.39,17850.5,United Kingdom\n", `x.csv line 4: CustomerID "17850.5": not a positive whole number`},
		{"date", head + "536365,71053,LANTERN,6,01/12/2010 08:26,3.39,,United Kingdom\n", `x.csv line 2: InvoiceDate "01/12/2010 08:26"`},
		{"invoice", head + ",71053,LANTERN,6,2010-12-01 08:26:00,3.39,,United Kingdom\n", `x.csv line 2: empty InvoiceNo`},
		{"fields", head + good + "536365,71053,LANTERN,6\n", `x.csv: record on line 3: wrong number of fields`},
		{"quote", head + "536365,71053,\"LANTERN,6,2010-12-01 08:26:00,3.39,,United Kingdom\n", `x.csv: parse error on line 2, column 66: extraneous or missing " in quoted-field`},
		{"header", "InvoiceNo,StockCode\n", `x.csv line 1: header "InvoiceNo,StockCode"`},
		{"empty", "", `x.csv: empty file`},
	} {
		evs, err := ReadCSV(strings.NewReader(tc.in), "dir/x.csv")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: ReadCSV = %d events, %v; want an error containing %q", tc.name, len(evs), err, tc.want)
		}
	}
	// A quoted multi-line field counts its lines: the error names the line the bad
	// field is on, not the record number.
	in := head + "536365,71053,\"TWO\nLINES\",6,2010-12-01 08:26:00,3.39,,United Kingdom\n536365,71053,X,6,2010-12-01 08:26:00,-,,United Kingdom\n"
	if _, err := ReadCSV(strings.NewReader(in), "x.csv"); err == nil || !strings.Contains(err.Error(), "x.csv line 4:") {
		t.Errorf("multi-line field: %v", err)
	}
	// fn's error is returned as is.
	stop := errors.New("stop")
	if err := ScanCSV(strings.NewReader(head+good), "x.csv", func(event.Event) error { return stop }); err != stop {
		t.Errorf("ScanCSV = %v, want fn's error", err)
	}
}

// The payload is read back by DecodeLine exactly; a description that needs JSON
// escaping survives.
func TestReadCSVRoundTrip(t *testing.T) {
	evs := readRetail(t)
	// Re-read the first file with encoding/csv directly and compare field by field.
	f, err := os.Open(retailPath(retailFiles[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs[1:] {
		l, err := DecodeLine(evs[i].ID, evs[i].Payload)
		if err != nil {
			t.Fatal(err)
		}
		cust := ""
		if l.CustomerID != 0 {
			cust = strconv.FormatInt(l.CustomerID, 10) + ".0"
		}
		got := []string{l.InvoiceNo, l.StockCode, l.Description, strconv.FormatInt(l.Quantity, 10), l.InvoiceDate, rec[5], cust, l.Country}
		if strings.Join(got, "\x00") != strings.Join(rec, "\x00") {
			t.Fatalf("row %d: decoded %q, file %q", i+1, got, rec)
		}
		// The price through float64, not ParseMoney: thousandths agree exactly.
		if p, _ := strconv.ParseFloat(rec[5], 64); int64(math.Round(p*1000)) != int64(l.UnitPrice) {
			t.Fatalf("row %d: price %q decoded as %v", i+1, rec[5], l.UnitPrice)
		}
	}
}
