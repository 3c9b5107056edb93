package builtin

import (
	"testing"

	"github.com/gale-stream/gale/internal/leaktest"
)

// The sources and sinks start connections, servers and engines: every goroutine
// they start must end with its test.
func TestMain(m *testing.M) { leaktest.Main(m) }
