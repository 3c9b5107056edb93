package clock

// rdtsc returns the time-stamp counter (clock_amd64.s).
func rdtsc() int64

var ticks func() int64

func init() { ticks, NanosPerTick = calibrate(rdtsc) }

// Ticks reads the counter.
func Ticks() int64 { return ticks() }
