package clock

import (
	"testing"
	"time"
)

// TestTicksMeasureTime: 20 ms of sleep measures 20 ms (within 10%) in converted ticks.
func TestTicksMeasureTime(t *testing.T) {
	t0, m0 := Ticks(), time.Now()
	time.Sleep(20 * time.Millisecond) // wall time by nature: what the ticks must measure
	d, want := Nanos(Ticks()-t0), time.Since(m0)
	if ratio := float64(d) / float64(want); ratio < 0.9 || ratio > 1.1 {
		t.Errorf("ticks measured %v for %v (NanosPerTick %v)", time.Duration(d), want, NanosPerTick)
	}
	if Nanos(-5) != 0 {
		t.Error("a negative difference is not 0")
	}
}

// TestCalibrateFallsBack: a counter that stands still is refused.
func TestCalibrateFallsBack(t *testing.T) {
	read, npt := calibrate(func() int64 { return 42 })
	if npt != 1 || read() == 42 {
		t.Errorf("a stopped counter was accepted (npt %v)", npt)
	}
}

func BenchmarkTicks(b *testing.B) {
	var s int64
	for i := 0; i < b.N; i++ {
		s += Ticks()
	}
	_ = s
}
