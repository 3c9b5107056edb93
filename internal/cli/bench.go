package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/event"
	"github.com/gale-stream/gale/internal/bench"
	"github.com/gale-stream/gale/pipelines/orders"
)

func BenchCmd() *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "Measure gale on this machine"}
	c.AddCommand(benchIngestCmd(), benchClusterCmd())
	return c
}

func benchIngestCmd() *cobra.Command {
	var (
		dir        string
		data       []string
		o          bench.IngestOptions
		asJSON     bool
		duration   time.Duration
		cpuprofile string
	)
	c := &cobra.Command{
		Use:   "ingest",
		Short: "PERSISTED answers/s and latency through the HTTP API, beside the disk's raw fdatasync limit",
		Long: `Runs eight rows, one after the other, each for --duration:
  1. the disk: one writer appending records of the events' mean encoded size, one fdatasync each;
  2. the disk: --clients writers, group commit (one fdatasync per group), no HTTP, no Pebble;
  3. POST /v1/events?ack=persisted from --clients concurrent clients, one event each;
  4. POST /v1/events:batch?ack=persisted, NDJSON batches of --batch-size from --batch-clients;
  5. raw JetStream, 1 replica: --clients publishers, each publishing one encoded record
     (synchronously: the PubAck awaited) to the log's stream as the log does, no HTTP;
  6. row 3 on the JetStream log (gale serve --log jetstream) with 1 replica;
  7. row 5 with 3 replicas;
  8. row 6 with 3 replicas.
Rows 3, 4, 6 and 8 run gale's ingest service in this process without a topology, so
they measure PERSISTED answers. Rows 5 to 8 run on three embedded NATS nodes (as gale
nats starts them: JetStream fsyncs every write, sync_interval: always) routed to each
other on loopback in this process, started once, with a fresh stream per row and the
row's client connected to the node that leads that stream (where the leader sits
changes the rate a lot, so raw and log rows are compared with it in the same place); the
output gives rows 6 and 8 as a fraction of rows 5 and 7 (the replicated log against
raw JetStream at the same replicas and sync). Events are real order lines (--data
CSV files), each sent with a fresh event_id. Files go under --dir, which must be on
the disk to measure, and are removed afterwards.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(200) // as gale serve runs; GOGC in the environment wins
			}
			if cpuprofile != "" {
				pf, err := os.Create(cpuprofile)
				if err != nil {
					return err
				}
				defer pf.Close()
				if err := pprof.StartCPUProfile(pf); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			var evs []event.Event
			for _, p := range data {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				e, err := orders.ReadCSV(f, filepath.Base(p))
				f.Close()
				if err != nil {
					return err
				}
				evs = append(evs, e...)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			tmp, err := os.MkdirTemp(dir, "bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			o.Dir, o.Events, o.Duration = tmp, evs, duration
			fmt.Fprintf(cmd.ErrOrStderr(), "gale bench ingest: %d real events from %d file(s), %v per row, files under %s\n",
				len(evs), len(data), duration, tmp)
			rows, err := bench.Ingest(ctx, o)
			if asJSON {
				type jrow struct {
					Name         string  `json:"name"`
					Events       uint64  `json:"events"`
					Requests     uint64  `json:"requests"`
					Errors       uint64  `json:"errors"`
					Seconds      float64 `json:"seconds"`
					EventsPerSec float64 `json:"events_per_sec"`
					P50Ms        float64 `json:"p50_ms"`
					P99Ms        float64 `json:"p99_ms"`
					MaxMs        float64 `json:"max_ms"`
					Row          int     `json:"row"`
					VsRaw        float64 `json:"vs_raw_jetstream,omitempty"`
				}
				var out []jrow
				for _, r := range rows {
					out = append(out, jrow{r.Name, r.Events, r.Requests, r.Errors, r.Elapsed.Seconds(), r.EventsPerSec(),
						ms(r.Latency.Quantile(0.5)), ms(r.Latency.Quantile(0.99)), ms(r.Latency.Max()), r.Num, r.VsRaw})
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				_ = enc.Encode(out)
			} else {
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "row\tevents/s\tp50 ms\tp99 ms\tmax ms\tevents\t\t")
				for _, r := range rows {
					fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t\t%s\n", r.Num, r.EventsPerSec(),
						ms(r.Latency.Quantile(0.5)), ms(r.Latency.Quantile(0.99)), ms(r.Latency.Max()), r.Events, r.Name)
				}
				tw.Flush()
				for _, r := range rows {
					if r.VsRaw > 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "row %d / row %d (JetStream log / raw JetStream, same replicas and sync): %.2f\n", r.Num, r.RawNum, r.VsRaw)
					}
				}
				for _, r := range rows {
					if r.Log.Commits > 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: %d group commits, %.1f records and %.2f ms each on average\n", r.Name,
							r.Log.Commits, float64(r.Log.Records)/float64(r.Log.Commits), ms(r.Log.CommitTime)/float64(r.Log.Commits))
					}
				}
				fmt.Fprintln(cmd.OutOrStdout(), "latency: per request for HTTP rows (a batch answers all its events at once), per record for disk rows, per publish for raw JetStream rows")
			}
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "dir", ".", "directory on the disk to measure (a temporary bench-* folder is made and removed in it)")
	f.StringSliceVar(&data, "data", []string{"testdata/retail/2010-12-01.csv", "testdata/retail/2010-12-02.csv", "testdata/retail/2010-12-03.csv"}, "CSV files of real order lines to send")
	f.IntVar(&o.Clients, "clients", 64, "concurrent single-event clients (and disk writers)")
	f.IntVar(&o.BatchClients, "batch-clients", 8, "concurrent batch clients")
	f.IntVar(&o.BatchSize, "batch-size", 1000, "events per NDJSON batch")
	f.DurationVar(&duration, "duration", 5*time.Second, "length of each row")
	f.BoolVar(&asJSON, "json", false, "print the rows as JSON")
	f.IntSliceVar(&o.Rows, "rows", nil, "run only these rows (1-8), e.g. --rows 2,3 or --rows 1,2,5,6,7,8 for the JetStream log beside its ceiling and the fsync floor")
	f.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	f.BoolVar(&o.Metrics, "metrics", false, "rows 3 and 4 with gale serve's ingest metrics, gathered every second (their cost)")
	f.BoolVar(&o.Auth, "auth", false, "rows 3 and 4 behind gale serve's access checks, each request with a bearer token (their cost)")
	f.IntVar(&o.Slices, "slices", 1, "run rows 5 and 6, and 7 and 8, in turns of --duration/N each (a fresh stream each), added up: both rows of a pair see the same share of a machine whose load drifts")
	return c
}
