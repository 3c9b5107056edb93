package transport_test

import (
	"testing"

	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/transporttest"
)

func TestLocalConformance(t *testing.T) {
	transporttest.TestTransport(t, "local", func(*testing.T) transport.Transport { return transport.NewLocal() })
	transporttest.TestTransport(t, "local-faulty", func(*testing.T) transport.Transport {
		return transporttest.NewFaulty(transport.NewLocal(),
			transporttest.Drop(0.01), transporttest.Duplicate(0.005), transporttest.Reorder(0.01, 16), transporttest.Seed(11))
	})
}
