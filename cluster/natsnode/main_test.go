package natsnode_test

import (
	"testing"

	"github.com/gale-stream/gale/internal/leaktest"
)

// TestMain fails the run if goroutines outlive the tests (every node and connection
// is closed by the tests' cleanups).
func TestMain(m *testing.M) { leaktest.Main(m) }
