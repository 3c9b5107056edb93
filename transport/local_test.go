package transport_test

import (
	"testing"

	"github.com/gale-stream/gale/codec"
	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/transporttest"
)

func TestLocalConformance(t *testing.T) {
	transporttest.TestTransport(t, "local", func(*testing.T) transport.Transport { return transport.NewLocal() })
	transporttest.TestTransport(t, "local-faulty", func(*testing.T) transport.Transport {
		return transporttest.NewFaulty(transport.NewLocal(),
			transporttest.Drop(0.01), transporttest.Duplicate(0.005), transporttest.Reorder(0.01, 16), transporttest.Seed(11))
	})
	// One fault at a time, so that the promises the others break are still checked:
	// Ordered and NoDuplicates without Lossless, Lossless with duplicates.
	transporttest.TestTransport(t, "local-lossy", func(*testing.T) transport.Transport {
		return transporttest.NewFaulty(transport.NewLocal(), transporttest.Drop(0.05), transporttest.Seed(13))
	})
	transporttest.TestTransport(t, "local-duplicating", func(*testing.T) transport.Transport {
		return transporttest.NewFaulty(transport.NewLocal(), transporttest.Duplicate(0.05), transporttest.Seed(14))
	})
	// Every message crosses the codec, as between processes.
	st := codec.NewStreams(transporttest.Topology())
	clone := func(m *transport.Message) (*transport.Message, error) { return codec.Clone(m, st) }
	transporttest.TestTransport(t, "local-serialized", func(*testing.T) transport.Transport {
		return transporttest.NewFaulty(transport.NewLocal(), transporttest.Serialize(clone))
	})
	transporttest.TestTransport(t, "local-serialized-faulty", func(*testing.T) transport.Transport {
		return transporttest.NewFaulty(transport.NewLocal(), transporttest.Serialize(clone),
			transporttest.Drop(0.01), transporttest.Duplicate(0.005), transporttest.Reorder(0.01, 16), transporttest.Seed(12))
	})
}
