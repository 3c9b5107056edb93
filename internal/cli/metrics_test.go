package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gale-stream/gale/internal/testio"
	"github.com/gale-stream/gale/internal/waitfor"
)

// wordcountMetrics runs gale wordcount --ui on one book with a linger, scrapes
// /metrics once the job is done, and ends the linger.
func wordcountMetrics(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := WordcountCmd()
	var stderr testio.SyncBuffer
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--ui", "127.0.0.1:0", "--ui-linger", "10m", "--fail-rate", "0.05", "../../testdata/books/105.txt"})
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	waitfor.Until(t, time.Minute, func() error {
		select {
		case err := <-done:
			t.Fatalf("wordcount ended before lingering: %v\n%s", err, stderr.String())
		default:
		}
		if !strings.Contains(stderr.String(), "job done") {
			return fmt.Errorf("wordcount not done:\n%s", stderr.String())
		}
		return nil
	})
	m := regexp.MustCompile(`web UI on (http://\S+/) `).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no UI address in:\n%s", stderr.String())
	}
	resp, err := http.Get(m[1] + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("wordcount: %v", err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	return string(body)
}

// TestWordcountUIMetrics: gale wordcount --ui exports the topology's metrics with
// spout trees and bolt inputs apart, queue depth in tuples, and the process's
// metrics; promtool, if installed, lints them without a complaint.
func TestWordcountUIMetrics(t *testing.T) {
	text := wordcountMetrics(t)
	for _, want := range []string{
		`gale_spout_acked_total{component="lines",task="1",topology="wordcount"} `,
		`gale_bolt_acked_total{component="split",`,
		`gale_bolt_queue_depth_tuples{component="count",`,
		`gale_build_info{goversion="go`,
		"\ngo_goroutines ",
		"\nprocess_resident_memory_bytes ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(text, "gale_acked_total") {
		t.Error("gale_acked_total still mixes spout trees and bolt inputs")
	}
	bin, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("GALE_TEST_PROMTOOL") == "1" {
			t.Fatalf("GALE_TEST_PROMTOOL=1 but no promtool in PATH: %v (apt-get install prometheus)", err)
		}
		t.Skip("no promtool in PATH (apt-get install prometheus; GALE_TEST_PROMTOOL=1 makes this a failure)")
	}
	check := exec.Command(bin, "check", "metrics")
	check.Stdin = strings.NewReader(text)
	if out, err := check.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics on gale wordcount --ui's /metrics: %v\n%s", err, out)
	}
}
