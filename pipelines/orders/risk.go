package orders

import "strings"

// Flags are the risk check's findings on one order line, a bit set.
type Flags uint8

// Risk flags.
const (
	// Cancellation: the invoice number starts with "C".
	Cancellation Flags = 1 << iota
	// NegativeQuantity: quantity < 0 (every cancellation line, and stock adjustments).
	NegativeQuantity
	// UnknownCustomer: the line has no CustomerID (a guest order).
	UnknownCustomer
	// LargeAmount: |quantity × unit price| is above Options.LargeAmount.
	LargeAmount
)

var flagNames = [...]string{"cancellation", "negative_quantity", "unknown_customer", "large_amount"}

// Has reports whether every flag of g is set in f.
func (f Flags) Has(g Flags) bool { return f&g == g }

// String lists the set flags, "|"-separated ("" for none).
func (f Flags) String() string {
	var names []string
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, "|")
}

// Assess returns the risk flags of l. large is the threshold of LargeAmount: the flag
// is set when |amount| > large. Amount overflow was ruled out by DecodeLine.
func Assess(l *OrderLine, large Money) Flags {
	var f Flags
	if l.IsCancellation() {
		f |= Cancellation
	}
	if l.Quantity < 0 {
		f |= NegativeQuantity
	}
	if l.CustomerID == 0 {
		f |= UnknownCustomer
	}
	if a, _ := l.Amount(); a > large || -a > large {
		f |= LargeAmount
	}
	return f
}

// Outcomes of the decision.
const (
	// Accept: stock reserved (or returned, or not a product) and no risk flag.
	Accept = "accept"
	// Review: stock is fine but the risk check raised a flag: a person looks at it.
	Review = "review"
	// Reject: not enough stock for the sale, whatever the risk flags.
	Reject = "reject"
)

// Decide combines the two checks: Reject if stock is short, else Review if any risk
// flag is set, else Accept.
func Decide(f Flags, s StockVerdict) string {
	switch {
	case s.Verdict == Short:
		return Reject
	case f != 0:
		return Review
	}
	return Accept
}

// DecisionFields are the fields of the decision bolt's tuples, one per order line:
// the line (LineFields), then
//
//	flags        uint8   the risk check's Flags
//	stock        string  the stock check's verdict (StockVerdict.Verdict)
//	stock_level  int64   the stock level after the line (StockVerdict.Level)
//	decision     string  Decide's outcome: Accept, Review or Reject
var DecisionFields = append(append([]string(nil), LineFields...), "flags", "stock", "stock_level", "decision")
