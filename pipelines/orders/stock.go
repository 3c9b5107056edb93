package orders

import "strings"

// Stock verdicts.
const (
	// Reserved: a sale (quantity >= 0) found enough stock; the level went down by it.
	Reserved = "reserved"
	// Short: a sale asked for more than the level; the level did not move.
	Short = "short"
	// Returned: a negative quantity (a cancellation, or one of the dataset's stock
	// adjustments); the level went up by it.
	Returned = "returned"
	// Unstocked: the stock code is not a product (postage, discount, fees...); no level.
	Unstocked = "unstocked"
)

// StockVerdict is what the stock check decided for one order line.
type StockVerdict struct {
	Verdict string // Reserved, Short, Returned or Unstocked
	Level   int64  // the stock code's level after this line (0 if Unstocked)
}

// Stock keeps running stock levels per stock code and remembers the verdict it gave
// each event id, so that a replayed event gets the same verdict and moves no stock
// (at-least-once delivery plus an idempotent effect, seed 000 §5). It is a pure state
// machine (no clock, goroutines or locks): one stock task owns one, and the stock
// bolt's tick calls Rotate.
//
// Memory: one level per stock code seen, and one verdict per event id seen during the
// last one to two rotation periods (two generations: Rotate forgets the older one),
// about 84 bytes per remembered event plus its id (measured over 1,000,000 events). An
// event replayed after its verdict was forgotten would be applied again, so the
// period (Options.RememberFor) must exceed the longest time a replay can take: the
// message timeout plus the spout's retry delay. The levels live in memory only: a
// restarted topology starts every product at the initial level again.
type Stock struct {
	initial   int64
	stocked   func(code string) bool
	levels    map[string]int64
	cur, prev map[string]StockVerdict
}

// NewStock returns stock levels that start at initial units for every stock code for
// which stocked returns true (nil: IsProduct).
func NewStock(initial int64, stocked func(code string) bool) *Stock {
	if stocked == nil {
		stocked = IsProduct
	}
	return &Stock{initial: initial, stocked: stocked, levels: map[string]int64{},
		cur: map[string]StockVerdict{}, prev: map[string]StockVerdict{}}
}

// Apply checks quantity units of code for event id and returns the verdict. If the
// event was applied already (and not forgotten), it returns the verdict given then,
// with replay true, and changes nothing.
func (s *Stock) Apply(id, code string, quantity int64) (v StockVerdict, replay bool) {
	if v, ok := s.cur[id]; ok {
		return v, true
	}
	if v, ok := s.prev[id]; ok {
		// Keep it for another period: a replayed event may well be replayed again.
		delete(s.prev, id)
		s.cur[id] = v
		return v, true
	}
	switch {
	case !s.stocked(code):
		v = StockVerdict{Verdict: Unstocked}
	default:
		level, ok := s.levels[code]
		if !ok {
			level = s.initial
		}
		switch {
		case quantity < 0:
			level -= quantity
			v.Verdict = Returned
		case quantity <= level:
			level -= quantity
			v.Verdict = Reserved
		default:
			v.Verdict = Short
		}
		s.levels[code] = level
		v.Level = level
	}
	s.cur[id] = v
	return v, false
}

// Level returns the current level of code (the initial level if never seen).
func (s *Stock) Level(code string) int64 {
	if l, ok := s.levels[code]; ok {
		return l
	}
	return s.initial
}

// Remembered is the number of event verdicts held.
func (s *Stock) Remembered() int { return len(s.cur) + len(s.prev) }

// Rotate forgets the verdicts not given or asked for since the previous Rotate.
func (s *Stock) Rotate() {
	s.prev, s.cur = s.cur, make(map[string]StockVerdict, len(s.cur))
}

// nonProducts are the stock codes of the UCI data that are not goods (measured over
// the whole dataset): postage, carriage, manual corrections, discounts, samples, bank
// and Amazon fees, a charity (CRUK), padding lines and bad-debt adjustments.
var nonProducts = map[string]bool{
	"POST": true, "DOT": true, "C2": true, "M": true, "m": true, "D": true, "S": true,
	"BANK CHARGES": true, "AMAZONFEE": true, "CRUK": true, "PADS": true, "B": true,
}

// IsProduct reports whether a stock code names goods that have a stock level: every
// code but the dataset's service codes (POST, DOT, C2, M, D, S, BANK CHARGES,
// AMAZONFEE, CRUK, PADS, B) and gift vouchers (gift_0001_10...).
func IsProduct(code string) bool {
	return !nonProducts[code] && !strings.HasPrefix(code, "gift_")
}
