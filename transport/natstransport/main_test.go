package natstransport_test

import (
	"testing"

	"github.com/gale-stream/gale/internal/leaktest"
)

// TestMain fails the run if goroutines outlive the tests (servers, connections,
// transports and engines are all closed by the tests' cleanups).
func TestMain(m *testing.M) { leaktest.Main(m) }
