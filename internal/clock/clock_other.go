//go:build !amd64

package clock

// Ticks reads the monotonic clock (nanoseconds) where no cheaper counter is used.
func Ticks() int64 { return monotonic() }
