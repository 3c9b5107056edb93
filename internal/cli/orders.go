package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/gale-stream/gale/ingest"

	"github.com/gale-stream/gale/pipelines/orders"
	"github.com/gale-stream/gale/server"
)

// ordersResult is the one-command run's report.
type ordersResult struct {
	Ingest          *ingest.Report
	OrderLines      int64
	Invoices        int64
	SinkDuplicates  uint64 // rows the sink found already written (replays absorbed)
	SinkBatches     uint64
	DataDir, SinkDB string
}

// runOrders starts gale serve with the orders pipeline on o, ingests files into it,
// reads the sink, and shuts down.
func runOrders(ctx context.Context, o server.Options, files []string, io ingest.SendOptions, progress io.Writer) (*ordersResult, error) {
	o.Pipeline = orders.Pipeline()
	in, err := OpenInputs(files)
	if err != nil {
		return nil, err
	}
	s, err := server.Start(ctx, o)
	if err != nil {
		CloseInputs(in)
		return nil, err
	}
	res := &ordersResult{DataDir: o.DataDir, SinkDB: s.DB.String()}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Shutdown(sctx)
	}()
	if progress != nil {
		fmt.Fprintf(progress, "gale orders: serving on %s (log in %s, sink %s)\n", s.URL(), filepath.Join(o.DataDir, "log"), s.DB)
	}
	rep, err := RunIngest(ctx, &ingest.Client{URL: s.URL()}, in, io, NewIngestProgress(progress, "gale orders"))
	res.Ingest = rep
	if err != nil {
		return res, err
	}
	if err := s.DB.SQL.QueryRowContext(ctx, "SELECT count(*) FROM order_lines").Scan(&res.OrderLines); err != nil {
		return res, fmt.Errorf("counting order_lines: %w", err)
	}
	if err := s.DB.SQL.QueryRowContext(ctx, "SELECT count(*) FROM invoice_summary").Scan(&res.Invoices); err != nil {
		return res, fmt.Errorf("counting invoice_summary: %w", err)
	}
	c := s.SinkCounters.Snapshot()
	res.SinkDuplicates, res.SinkBatches = c.Duplicates, c.Batches
	return res, nil
}

func OrdersCmd() *cobra.Command {
	var f ServeFlags
	var keep bool
	io := ingest.DefaultSendOptions()
	c := &cobra.Command{
		Use:   "orders [FILE.csv...]",
		Short: "One command: serve the orders pipeline, ingest retail CSV files into it, report (default testdata/retail/*.csv)",
		Long: `Runs gale serve (orders pipeline: parse → risk check and stock check → join on event
id → decision anchored to both → idempotent SQL sink) in this process, posts every row
of the CSV files to it as gale ingest does, and reports the final status of every
event, the rows in the sink and the duplicates it absorbed. Without --data a fresh
gale-orders-* directory in the system's temp dir is used and removed at the end
(--keep keeps it). Exit status 1 if any event ends neither PROCESSED nor FAILED_FINAL
with a reason.`,
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := CheckIngestFlags(io); err != nil {
				return err
			}
			if len(files) == 0 {
				m, _ := filepath.Glob("testdata/retail/*.csv")
				if len(m) == 0 {
					return fmt.Errorf("no files given and none in testdata/retail (run from the repository root)")
				}
				files = m
			}
			temp := ""
			if !cmd.Flags().Changed("data") {
				d, err := os.MkdirTemp("", "gale-orders-")
				if err != nil {
					return err
				}
				f.Server.DataDir, temp = d, d
				if !keep {
					// runOrders has shut the server down (log and sink closed) by then.
					defer os.RemoveAll(temp)
				}
			}
			o, err := f.Options(func(string) (server.Pipeline, error) { return orders.Pipeline(), nil })
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := runOrders(ctx, o, files, io, cmd.ErrOrStderr())
			if res != nil && res.Ingest != nil {
				w := cmd.OutOrStdout()
				PrintIngestReport(w, res.Ingest)
				fmt.Fprintf(w, "sink %s: %d order_lines rows, %d invoice_summary rows, %d duplicate rows absorbed in %d batches\n",
					res.SinkDB, res.OrderLines, res.Invoices, res.SinkDuplicates, res.SinkBatches)
				switch {
				case temp == "":
					fmt.Fprintf(w, "data directory: %s\n", res.DataDir)
				case keep:
					fmt.Fprintf(w, "data directory: %s (kept)\n", res.DataDir)
				default:
					fmt.Fprintf(w, "data directory: %s, removed (--keep keeps it)\n", res.DataDir)
				}
			}
			if err != nil {
				return err
			}
			if n := res.Ingest.Broken(); n > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "gale orders: %d event(s) ended neither PROCESSED nor FAILED_FINAL with a reason\n", n)
				return ExitError{1}
			}
			return nil
		},
	}
	f.Register(c, "127.0.0.1:0")
	IngestFlags(c, &io)
	c.Flags().BoolVar(&keep, "keep", false, "keep the fresh data directory made without --data (named in the report)")
	d := c.Flags().Lookup("data")
	d.Usage = "data directory, kept (default: a fresh gale-orders-* directory in the system's temp dir, removed at the end unless --keep)"
	d.DefValue = ""
	c.Flags().Lookup("log-level").DefValue = "warn"
	_ = c.Flags().Set("log-level", "warn")
	return c
}
