package natstransport_test

import (
	"testing"

	"github.com/gale-stream/gale/transport"
	"github.com/gale-stream/gale/transport/natstransport"
	"github.com/gale-stream/gale/transport/transporttest"
)

// The conformance suite on an embedded server: one transport holding every endpoint;
// the same behind a Faulty that drops 1%; and the endpoints split over three
// transports, each on its own connection, as three processes would have them.
func TestConformance(t *testing.T) {
	url := runServer(t).ClientURL()
	transporttest.TestTransport(t, "nats", func(t *testing.T) transport.Transport {
		return newTransport(t, url, newPrefix())
	})
	transporttest.TestTransport(t, "nats-lossy", func(t *testing.T) transport.Transport {
		return transporttest.NewFaulty(newTransport(t, url, newPrefix()), transporttest.Drop(0.01))
	})
	transporttest.TestTransport(t, "nats-3-processes", func(t *testing.T) transport.Transport {
		return newCluster(t, url, 3)
	})
	transporttest.TestTransport(t, "nats-3-processes-local-delivery", func(t *testing.T) transport.Transport {
		return newCluster(t, url, 3, natstransport.WithLocalDelivery())
	})
}
