// Package ingesttest waits on the statuses of ingested events, for the tests of
// gale serve: in process (Service.Status) or over HTTP (Client.Status).
package ingesttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gale-stream/gale/ingest"
	"github.com/gale-stream/gale/internal/waitfor"
)

// StatusFunc reads one event's status; found is false when the service does not
// know the event (yet).
type StatusFunc func(id string) (st ingest.EventStatus, found bool, err error)

// Of is the StatusFunc of a Service in this process.
func Of(svc *ingest.Service) StatusFunc {
	return func(id string) (ingest.EventStatus, bool, error) {
		st, err := svc.Status(id)
		if errors.Is(err, ingest.ErrNotFound) {
			return st, false, nil
		}
		return st, err == nil, err
	}
}

// OfClient is the StatusFunc of a service over HTTP, each request bounded by ctx.
func OfClient(ctx context.Context, c *ingest.Client) StatusFunc {
	return func(id string) (ingest.EventStatus, bool, error) { return c.Status(ctx, id) }
}

// WaitProcessed waits until every id is PROCESSED and returns their statuses. It
// fails t at once when one is FAILED_FINAL (it never will be), and after within
// naming the first id not yet PROCESSED and what its status said.
func WaitProcessed(t testing.TB, within time.Duration, status StatusFunc, ids []string) map[string]ingest.EventStatus {
	t.Helper()
	done := make(map[string]ingest.EventStatus, len(ids))
	waitfor.Until(t, within, func() error {
		for _, id := range ids {
			if _, ok := done[id]; ok {
				continue
			}
			st, found, err := status(id)
			switch {
			case err != nil || !found:
				return fmt.Errorf("%s not PROCESSED (%d of %d are): found %v, %v", id, len(done), len(ids), found, err)
			case st.Status == ingest.FailedFinal:
				t.Fatalf("%s is FAILED_FINAL after %d attempts: %s", id, st.Attempts, st.LastError)
			case st.Status != ingest.Processed:
				return fmt.Errorf("%s still %s (%d of %d are PROCESSED)", id, st.Status, len(done), len(ids))
			}
			done[id] = st
		}
		return nil
	})
	return done
}
