package jslog

import (
	"testing"

	"github.com/gale-stream/gale/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
