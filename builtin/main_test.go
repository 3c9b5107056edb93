package builtin_test

import (
	"testing"

	"github.com/gale-stream/gale/internal/leaktest"
)

// The tests start engines: every goroutine they start must end with them.
func TestMain(m *testing.M) { leaktest.Main(m) }
