package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gale-stream/gale/clock"
)

// retryAfter waits d on c, unless stop closes first.
func retryAfter(c clock.Clock, d time.Duration, stop <-chan struct{}) string {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case at := <-t.C():
		return "retry at " + at.UTC().Format(time.TimeOnly)
	case <-stop:
		return "stopped"
	}
}

func ExampleFake() {
	fake := clock.NewFake(time.Date(2024, 1, 1, 12, 0, 0, 0, time.UTC))
	done := make(chan string)
	go func() { done <- retryAfter(fake, 10*time.Second, nil) }()

	// Wait until the goroutine has armed its timer: an event, not a sleep.
	if err := fake.BlockUntil(context.Background(), 1); err != nil {
		panic(err)
	}
	fake.Advance(10*time.Second - time.Nanosecond)
	select {
	case r := <-done:
		fmt.Println("early:", r)
	default:
		fmt.Println("a nanosecond before: still waiting")
	}
	fake.Advance(time.Nanosecond)
	fmt.Println(<-done)
	fmt.Println("waiters:", fake.Waiters())
	// Output:
	// a nanosecond before: still waiting
	// retry at 12:00:10
	// waiters: 0
}
