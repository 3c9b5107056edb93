package orders

import (
	"testing"
)

// Risk flags of known rows of testdata/retail.
func TestAssessKnownRows(t *testing.T) {
	lines := map[string]OrderLine{}
	for _, e := range readRetail(t) {
		l, err := DecodeLine(e.ID, e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		lines[e.ID] = l
	}
	for _, tc := range []struct {
		id    string
		flags Flags
		why   string
	}{
		{"2010-12-01:1", 0, "536365: 6 × 85123A at £2.55 for customer 17850"},
		{"2010-12-01:142", Cancellation | NegativeQuantity, "C536379: a discount of -1 × £27.50, cancelled"},
		{"2010-12-01:2407", NegativeQuantity | UnknownCustomer, "536589: a stock adjustment, -10 × 21777 at £0.00, no customer"},
		{"2010-12-01:871", LargeAmount, "536477: 480 × 21137 at £3.39 = £1,627.20"},
		{"2010-12-03:949", LargeAmount | UnknownCustomer, "536876: DOTCOM POSTAGE £887.52, no customer"},
		{"2010-12-02:1839", LargeAmount, "536830: 1,400 × 21915 at £1.06 = £1,484.00"},
	} {
		l := lines[tc.id]
		if got := Assess(&l, DefaultLargeAmount); got != tc.flags {
			t.Errorf("%s (%s): flags %q, want %q", tc.id, tc.why, got, tc.flags)
		}
	}
	// The threshold is strict: exactly at it is not large.
	l := lines["2010-12-01:871"]
	if Assess(&l, 1_627_200).Has(LargeAmount) || !Assess(&l, 1_627_199).Has(LargeAmount) {
		t.Error("LargeAmount is not |amount| > threshold")
	}
	if s := (Cancellation | LargeAmount).String(); s != "cancellation|large_amount" {
		t.Errorf("String = %q", s)
	}
}

func TestStockVerdictsAndReplay(t *testing.T) {
	s := NewStock(10, nil)
	steps := []struct {
		id, code string
		qty      int64
		want     StockVerdict
		replay   bool
	}{
		{"a", "22423", 6, StockVerdict{Reserved, 4}, false},
		{"b", "22423", 6, StockVerdict{Short, 4}, false},
		{"a", "22423", 6, StockVerdict{Reserved, 4}, true}, // replay: no second take
		{"c", "22423", -3, StockVerdict{Returned, 7}, false},
		{"b", "22423", 6, StockVerdict{Short, 4}, true}, // same verdict, though 7 are there now
		{"d", "22423", 7, StockVerdict{Reserved, 0}, false},
		{"p", "POST", 1, StockVerdict{Unstocked, 0}, false},
		{"g", "gift_0001_20", 1, StockVerdict{Unstocked, 0}, false},
		{"c", "22423", -3, StockVerdict{Returned, 7}, true},
	}
	for i, st := range steps {
		v, replay := s.Apply(st.id, st.code, st.qty)
		if v != st.want || replay != st.replay {
			t.Fatalf("step %d %s: %+v replay %v, want %+v replay %v", i, st.id, v, replay, st.want, st.replay)
		}
	}
	if s.Level("22423") != 0 || s.Level("POST") != 10 || s.Level("never") != 10 || s.Remembered() != 6 {
		t.Fatalf("levels %d %d %d, remembered %d", s.Level("22423"), s.Level("POST"), s.Level("never"), s.Remembered())
	}
	// One rotation keeps every verdict (and a replay refreshes it); two forget those
	// not asked for in between.
	s.Rotate()
	if v, replay := s.Apply("a", "22423", 6); !replay || v.Verdict != Reserved {
		t.Fatalf("after one rotation: %+v replay %v", v, replay)
	}
	s.Rotate()
	if s.Remembered() != 1 {
		t.Fatalf("after two rotations %d verdicts remembered, want 1 (a, refreshed)", s.Remembered())
	}
	if v, replay := s.Apply("a", "22423", 6); !replay || v.Level != 4 {
		t.Fatalf("refreshed verdict: %+v replay %v", v, replay)
	}
	// A forgotten event is applied again: the documented limit of RememberFor.
	if v, replay := s.Apply("d", "22423", 7); replay || v.Verdict != Short {
		t.Fatalf("forgotten d: %+v replay %v", v, replay)
	}
}

// The real data in file order: every verdict occurs, and replaying every event (in
// reverse order) gives the same verdicts and moves no stock.
func TestStockOnRetailIdempotent(t *testing.T) {
	evs := readRetail(t)
	lines := make([]OrderLine, len(evs))
	for i, e := range evs {
		l, err := DecodeLine(e.ID, e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		lines[i] = l
	}
	s := NewStock(DefaultInitialStock, nil)
	first := make([]StockVerdict, len(lines))
	count := map[string]int{}
	outcomes := map[string]int{}
	for i, l := range lines {
		v, replay := s.Apply(l.EventID, l.StockCode, l.Quantity)
		if replay {
			t.Fatalf("%s: replay on first sight", l.EventID)
		}
		first[i] = v
		count[v.Verdict]++
		outcomes[Decide(Assess(&l, DefaultLargeAmount), v)]++
	}
	// Measured with an independent Python fold over the CSV (same rules).
	if count[Reserved] != 7237 || count[Returned] != 113 || count[Short] != 43 || count[Unstocked] != 26 {
		t.Errorf("verdicts %v, want reserved 7237, returned 113, short 43, unstocked 26", count)
	}
	if outcomes[Accept] != 4994 || outcomes[Review] != 2382 || outcomes[Reject] != 43 {
		t.Errorf("outcomes %v, want accept 4994, review 2382, reject 43", outcomes)
	}
	if s.Level("85123A") != 0 || s.Level("84077") != 67 {
		t.Errorf("levels 85123A %d (want 0: 16 short lines), 84077 %d (want 67)", s.Level("85123A"), s.Level("84077"))
	}
	levels := map[string]int64{}
	for _, l := range lines {
		levels[l.StockCode] = s.Level(l.StockCode)
	}
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		v, replay := s.Apply(l.EventID, l.StockCode, l.Quantity)
		if !replay || v != first[i] {
			t.Fatalf("replay of %s: %+v replay %v, first %+v", l.EventID, v, replay, first[i])
		}
	}
	for code, want := range levels {
		if got := s.Level(code); got != want {
			t.Fatalf("%s: level %d after replays, %d before", code, got, want)
		}
	}
}
