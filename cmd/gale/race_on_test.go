//go:build race

package main

// raceEnabled: this test binary (and every gale child process it starts, which is
// this binary) runs under the race detector.
const raceEnabled = true
