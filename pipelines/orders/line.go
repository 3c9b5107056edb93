package orders

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gale-stream/gale/tuple"
)

// Money is an amount in thousandths of a pound sterling (GBP). Prices in the UCI data
// have at most three decimals (£0.001 on four lines of the whole dataset, two on the
// rest), so an integer of thousandths holds every price and every line amount exactly:
// invoice totals are sums of integers, equal in Go, SQLite and PostgreSQL.
type Money int64

// ParseMoney parses a plain decimal such as "2.55", "-11062.06" or "0.001": an
// optional minus sign, digits, and at most three decimals. Exponents, a plus sign,
// spaces and more decimals are refused (they would not round-trip exactly).
func ParseMoney(s string) (Money, error) {
	bad := func(why string) (Money, error) { return 0, fmt.Errorf("price %q: %s", s, why) }
	neg := strings.HasPrefix(s, "-")
	digits := strings.TrimPrefix(s, "-")
	whole, frac, dot := strings.Cut(digits, ".")
	if whole == "" || (dot && frac == "") {
		return bad("not a plain decimal")
	}
	for _, part := range []string{whole, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return bad("not a plain decimal")
			}
		}
	}
	switch {
	case len(frac) > 3:
		return bad("more than 3 decimals")
	case len(whole) > 12:
		return bad("too large")
	}
	w, _ := strconv.ParseInt(whole, 10, 64) // at most 12 digits: cannot fail
	f := int64(0)
	for i := 0; i < 3; i++ {
		f *= 10
		if i < len(frac) {
			f += int64(frac[i] - '0')
		}
	}
	m := Money(w*1000 + f)
	if neg {
		m = -m
	}
	return m, nil
}

// String formats m in pounds with at least two decimals ("2.55", "-27.50", "0.001").
func (m Money) String() string {
	sign := ""
	u := uint64(m)
	if m < 0 {
		sign, u = "-", uint64(-m)
	}
	s := fmt.Sprintf("%s%d.%03d", sign, u/1000, u%1000)
	return strings.TrimSuffix(s, "0")
}

// Times returns m × n, or an error if the product does not fit in an int64.
func (m Money) Times(n int64) (Money, error) {
	p := int64(m) * n
	if n != 0 && (p/n != int64(m) || (n == -1 && m < 0 && p < 0)) {
		return 0, fmt.Errorf("amount %v × %d overflows", m, n)
	}
	return Money(p), nil
}

// OrderLine is one invoice line of the UCI Online Retail data, as the parse bolt
// decodes it from an event's payload (see ReadCSV for the payload's shape).
type OrderLine struct {
	EventID     string // the event's id, "<day>:<row>" for lines read by ReadCSV
	InvoiceNo   string // "536365"; a "C" prefix marks a cancellation
	StockCode   string
	Description string
	Quantity    int64  // units; negative on cancellations and stock adjustments
	InvoiceDate string // "2010-12-01 08:26:00", UK local time, as written in the CSV
	UnitPrice   Money
	CustomerID  int64 // 0 when the line has none (a guest order)
	Country     string
}

// Amount is Quantity × UnitPrice (negative for returns), checked for overflow.
func (l *OrderLine) Amount() (Money, error) { return l.UnitPrice.Times(l.Quantity) }

// IsCancellation reports whether the line belongs to a cancellation invoice ("C"
// prefix, as the dataset's documentation defines it).
func (l *OrderLine) IsCancellation() bool { return strings.HasPrefix(l.InvoiceNo, "C") }

// LineFields are the fields that carry an order line in the pipeline's tuples, each a
// plain value (one the tuple codec encodes without registration), in this order:
//
//	event_id          string  OrderLine.EventID
//	invoice_no        string
//	stock_code        string
//	description       string
//	quantity          int64
//	invoice_date      string
//	unit_price_milli  int64   UnitPrice in thousandths of a pound
//	customer_id       int64   0 when the line has none
//	country           string
//
// parse emits exactly these; risk and decision emit them followed by their own.
var LineFields = []string{"event_id", "invoice_no", "stock_code", "description", "quantity",
	"invoice_date", "unit_price_milli", "customer_id", "country"}

// lineValues returns l's values in LineFields' order, followed by more.
func lineValues(l *OrderLine, more ...any) tuple.Values {
	return append(tuple.Values{l.EventID, l.InvoiceNo, l.StockCode, l.Description, l.Quantity,
		l.InvoiceDate, int64(l.UnitPrice), l.CustomerID, l.Country}, more...)
}

// lineOf reads the order line of a tuple whose stream has the LineFields, by name.
func lineOf(t *tuple.Tuple) (OrderLine, error) {
	var l OrderLine
	var price int64
	for _, f := range []struct {
		name string
		dst  any
	}{
		{"event_id", &l.EventID}, {"invoice_no", &l.InvoiceNo}, {"stock_code", &l.StockCode},
		{"description", &l.Description}, {"quantity", &l.Quantity}, {"invoice_date", &l.InvoiceDate},
		{"unit_price_milli", &price}, {"customer_id", &l.CustomerID}, {"country", &l.Country},
	} {
		v, _ := t.Lookup(f.name)
		ok := false
		switch d := f.dst.(type) {
		case *string:
			*d, ok = v.(string)
		case *int64:
			*d, ok = v.(int64)
		}
		if !ok {
			return l, fmt.Errorf("orders: field %q of a tuple from %s is %T, not an order line's (LineFields)", f.name, t.SourceComponent(), v)
		}
	}
	l.UnitPrice = Money(price)
	return l, nil
}

// payload is the JSON form of an order line in an event. Pointers tell a missing field
// from a zero one when decoding.
type payload struct {
	InvoiceNo   *string      `json:"invoice_no"`
	StockCode   *string      `json:"stock_code"`
	Description *string      `json:"description"`
	Quantity    *int64       `json:"quantity"`
	InvoiceDate *string      `json:"invoice_date"`
	UnitPrice   *json.Number `json:"unit_price"`
	CustomerID  *int64       `json:"customer_id"` // null or absent: no customer
	Country     *string      `json:"country"`
}

// ErrNotOrderLine is wrapped by DecodeLine's errors: the payload is not an order line,
// so processing it again can never succeed.
var ErrNotOrderLine = errors.New("orders: not an order line")

// DecodeLine decodes an event payload written by ReadCSV (or by any producer of the
// same shape) into an OrderLine; eventID is copied into it. Unknown fields, missing
// fields (all but description and customer_id are required), wrong JSON types, an
// empty invoice number or stock code, a price with more than three decimals and an
// amount that overflows are refused with an error wrapping ErrNotOrderLine.
func DecodeLine(eventID string, data []byte) (OrderLine, error) {
	var p payload
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return OrderLine{}, fmt.Errorf("%w: event %s: %v", ErrNotOrderLine, eventID, err)
	}
	bad := func(format string, a ...any) (OrderLine, error) {
		return OrderLine{}, fmt.Errorf("%w: event %s: %s", ErrNotOrderLine, eventID, fmt.Sprintf(format, a...))
	}
	if dec.More() {
		return bad("more than one JSON value")
	}
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"invoice_no", p.InvoiceNo != nil && *p.InvoiceNo != ""},
		{"stock_code", p.StockCode != nil && *p.StockCode != ""},
		{"quantity", p.Quantity != nil},
		{"invoice_date", p.InvoiceDate != nil && *p.InvoiceDate != ""},
		{"unit_price", p.UnitPrice != nil},
		{"country", p.Country != nil},
	} {
		if !f.ok {
			return bad("field %q missing or empty", f.name)
		}
	}
	price, err := ParseMoney(p.UnitPrice.String())
	if err != nil {
		return bad("unit_price: %v", err)
	}
	l := OrderLine{
		EventID: eventID, InvoiceNo: *p.InvoiceNo, StockCode: *p.StockCode,
		Quantity: *p.Quantity, InvoiceDate: *p.InvoiceDate, UnitPrice: price, Country: *p.Country,
	}
	if p.Description != nil {
		l.Description = *p.Description
	}
	if p.CustomerID != nil {
		if *p.CustomerID <= 0 {
			return bad("customer_id %d, must be positive (or null)", *p.CustomerID)
		}
		l.CustomerID = *p.CustomerID
	}
	if _, err := l.Amount(); err != nil {
		return bad("%v", err)
	}
	return l, nil
}
