//go:build race

package cli

// raceEnabled: this test binary (and every gale child process it starts, which is
// this binary) runs under the race detector.
const raceEnabled = true
