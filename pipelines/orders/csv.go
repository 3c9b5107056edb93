package orders

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gale-stream/gale/event"
)

// Header is the header line of every file of the UCI Online Retail data by day.
var Header = []string{"InvoiceNo", "StockCode", "Description", "Quantity", "InvoiceDate", "UnitPrice", "CustomerID", "Country"}

// Event fields set by ReadCSV.
const (
	Source = "retail"
	Type   = "order_line"
)

// dateLayout is how the CSV writes InvoiceDate.
const dateLayout = "2006-01-02 15:04:05"

// ReadCSV reads one file of the UCI Online Retail data (see testdata/retail/SOURCE.md)
// and returns one event per data row, in file order. See ScanCSV for the events.
func ReadCSV(r io.Reader, name string) ([]event.Event, error) {
	var out []event.Event
	err := ScanCSV(r, name, func(e event.Event) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// ScanCSV reads the CSV from r (RFC 4180, with the header line Header) and calls fn
// with one event per data row, in file order, without holding the file in memory.
//
// Event fields: ID "<base>:<n>", where base is name's base name without ".csv" and n
// the 1-based data row (the header is not counted), so identical rows, which are real
// in this data, stay distinct events; Source "retail"; Type "order_line"; Key the
// InvoiceNo; Payload a JSON object with invoice_no, stock_code, description (strings),
// quantity (integer), invoice_date (the string as written, "2010-12-01 08:26:00"),
// unit_price (the decimal as written, as a JSON number), customer_id (integer, or null
// when empty; the file writes it as a float, "17850.0") and country.
//
// A malformed row (wrong field count, bad quoting, a quantity that is not an integer,
// a price that is not a plain decimal with at most three places, a date not in that
// layout, a fractional or non-positive customer id, an empty invoice number or stock
// code) stops the scan with an error naming the file and line (1-based, header = 1).
// An error returned by fn stops it too and is returned as is.
func ScanCSV(r io.Reader, name string, fn func(event.Event) error) error {
	base := strings.TrimSuffix(filepath.Base(name), ".csv")
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // the header is checked whole below, with a clearer message
	cr.ReuseRecord = true
	rec, err := cr.Read()
	if err == io.EOF {
		return fmt.Errorf("orders: %s: empty file, want the header line", name)
	}
	if err != nil {
		return fmt.Errorf("orders: %s: %w", name, err)
	}
	if strings.Join(rec, ",") != strings.Join(Header, ",") {
		return fmt.Errorf("orders: %s line 1: header %q, want %q", name, strings.Join(rec, ","), strings.Join(Header, ","))
	}
	cr.FieldsPerRecord = len(Header)
	for row := 1; ; row++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			// csv.ParseError already says "record on line N" (and column).
			return fmt.Errorf("orders: %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		p, err := rowPayload(rec)
		if err != nil {
			return fmt.Errorf("orders: %s line %d: %w", name, line, err)
		}
		data, err := json.Marshal(p)
		if err != nil { // cannot happen: every field was checked above
			return fmt.Errorf("orders: %s line %d: %w", name, line, err)
		}
		e := event.Event{ID: base + ":" + strconv.Itoa(row), Source: Source, Type: Type, Key: rec[0], Payload: data}
		if err := e.Validate(); err != nil {
			return fmt.Errorf("orders: %s line %d: %w", name, line, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
}

// rowPayload checks one CSV record and returns its payload. Field order in the JSON
// follows the CSV's, which keeps payloads easy to compare with the file.
func rowPayload(rec []string) (*payload, error) {
	invoice, stock, desc, qty, date, price, cust, country := rec[0], rec[1], rec[2], rec[3], rec[4], rec[5], rec[6], rec[7]
	if invoice == "" {
		return nil, errors.New("empty InvoiceNo")
	}
	if stock == "" {
		return nil, errors.New("empty StockCode")
	}
	q, err := strconv.ParseInt(qty, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("Quantity %q: not an integer", qty)
	}
	if _, err := time.Parse(dateLayout, date); err != nil {
		return nil, fmt.Errorf("InvoiceDate %q: not %q", date, dateLayout)
	}
	m, err := ParseMoney(price)
	if err != nil {
		return nil, fmt.Errorf("UnitPrice: %w", err)
	}
	if _, err := m.Times(q); err != nil {
		return nil, err
	}
	p := &payload{
		InvoiceNo: &invoice, StockCode: &stock, Description: &desc, Quantity: &q,
		InvoiceDate: &date, UnitPrice: ptr(json.Number(price)), Country: &country,
	}
	if cust != "" {
		// Spark wrote the ids as floats ("17850.0"): parse as a float, keep an integer.
		f, err := strconv.ParseFloat(cust, 64)
		if err != nil || f != float64(int64(f)) || f <= 0 || f > 1<<53 {
			return nil, fmt.Errorf("CustomerID %q: not a positive whole number", cust)
		}
		p.CustomerID = ptr(int64(f))
	}
	return p, nil
}

func ptr[T any](v T) *T { return &v }
