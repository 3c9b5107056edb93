package builtin_test

import (
	"testing"

	"github.com/gale-stream/gale/internal/leaktest"
)

// The tests start engines: every goroutine must end with them.
func TestMain(m *testing.M) { leaktest.Main(m) }
