package orders

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseMoney(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Money
		str  string
	}{
		{"2.55", 2550, "2.55"},
		{"27.5", 27500, "27.50"},
		{"0.0", 0, "0.00"},
		{"0.001", 1, "0.001"},
		{"38970", 38_970_000, "38970.00"},
		{"-11062.06", -11_062_060, "-11062.06"},
		{"887.52", 887_520, "887.52"},
	} {
		got, err := ParseMoney(tc.in)
		if err != nil || got != tc.want || got.String() != tc.str {
			t.Errorf("ParseMoney(%q) = %d (%v), %v; want %d (%s)", tc.in, got, got, err, tc.want, tc.str)
		}
	}
	for _, in := range []string{"", "-", ".5", "5.", "1.2345", "1e3", "+1", " 1", "1,50", "--1", "1234567890123"} {
		if m, err := ParseMoney(in); err == nil {
			t.Errorf("ParseMoney(%q) = %v, want an error", in, m)
		}
	}
}

func TestMoneyTimes(t *testing.T) {
	if a, err := Money(3390).Times(480); err != nil || a != 1_627_200 {
		t.Errorf("480 × 3.39 = %v, %v; want 1627.20", a, err)
	}
	if a, err := Money(27500).Times(-1); err != nil || a != -27500 {
		t.Errorf("-1 × 27.50 = %v, %v", a, err)
	}
	for _, tc := range []struct {
		m Money
		n int64
	}{{math.MaxInt64 / 2, 3}, {math.MinInt64, -1}, {-1, math.MinInt64}, {1 << 40, 1 << 30}} {
		if a, err := tc.m.Times(tc.n); err == nil {
			t.Errorf("%d × %d = %d, want an overflow error", tc.m, tc.n, a)
		}
	}
}

// DecodeLine refuses what is not an order line, with ErrNotOrderLine and the event id.
func TestDecodeLineRefuses(t *testing.T) {
	ok := `{"invoice_no":"536365","stock_code":"85123A","description":"X","quantity":6,"invoice_date":"2010-12-01 08:26:00","unit_price":2.55,"customer_id":17850,"country":"United Kingdom"}`
	l, err := DecodeLine("e1", []byte(ok))
	if err != nil || l.EventID != "e1" || l.Quantity != 6 || l.UnitPrice != 2550 || l.CustomerID != 17850 || l.Country != "United Kingdom" {
		t.Fatalf("DecodeLine = %+v, %v", l, err)
	}
	for _, tc := range []struct{ payload, want string }{
		{`{"device":"thermostat","command":"set","celsius":21}`, `json: unknown field "device"`},
		{strings.Replace(ok, `"quantity":6`, `"quantity":"6"`, 1), "cannot unmarshal string"},
		{strings.Replace(ok, `"quantity":6`, `"quantity":6.5`, 1), "quantity"},
		{strings.Replace(ok, `"unit_price":2.55`, `"unit_price":2.555e0`, 1), `unit_price: price "2.555e0": not a plain decimal`},
		{strings.Replace(ok, `"stock_code":"85123A",`, ``, 1), `field "stock_code" missing or empty`},
		{strings.Replace(ok, `"invoice_no":"536365"`, `"invoice_no":""`, 1), `field "invoice_no" missing or empty`},
		{strings.Replace(ok, `"customer_id":17850`, `"customer_id":0`, 1), "customer_id 0, must be positive"},
		{strings.Replace(ok, `"quantity":6`, `"quantity":9223372036854775807`, 1), "overflows"},
		{ok + ` {}`, "more than one JSON value"},
		{`[1,2]`, "cannot unmarshal array"},
	} {
		_, err := DecodeLine("e7", []byte(tc.payload))
		if !errors.Is(err, ErrNotOrderLine) || !strings.Contains(err.Error(), "event e7") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DecodeLine(%s) = %v, want ErrNotOrderLine naming e7 and %q", tc.payload, err, tc.want)
		}
	}
	// customer_id null and description absent are fine: a guest line.
	guest := strings.Replace(strings.Replace(ok, `"customer_id":17850`, `"customer_id":null`, 1), `"description":"X",`, ``, 1)
	if l, err := DecodeLine("e2", []byte(guest)); err != nil || l.CustomerID != 0 || l.Description != "" {
		t.Errorf("guest line: %+v, %v", l, err)
	}
}
