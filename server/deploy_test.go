package server_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	dashboardFile = "../deploy/grafana/gale.json"
	rulesFile     = "../deploy/prometheus/gale-alerts.yml"
	rulesTestFile = "../deploy/prometheus/gale-alerts_test.yml"
)

// alertRules is the part of a Prometheus rules file the tests read.
type alertRules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Expr, For string
			Labels           map[string]string
			Annotations      map[string]string
		}
	}
}

// dashboardExprs returns every PromQL expression of the Grafana dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d["uid"] != "gale" || d["title"] != "gale" {
		t.Errorf("%s: uid %v title %v, want gale", dashboardFile, d["uid"], d["title"])
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(d["panels"])
	return exprs
}

func readRules(t *testing.T) alertRules {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var r alertRules
	if err := yaml.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	return r
}

var metricName = regexp.MustCompile(`\b(?:gale|go|process)_[A-Za-z0-9_]+`)

// TestDeployFilesNameRealMetrics: every metric the dashboard and the alert rules
// name is in a real scrape of gale serve (with its topology), and the rules page
// for what docs/monitoring.md says they do.
func TestDeployFilesNameRealMetrics(t *testing.T) {
	exprs := dashboardExprs(t)
	if len(exprs) < 20 {
		t.Fatalf("%d expressions in the dashboard, want its panels' (20 or more)", len(exprs))
	}
	rules := readRules(t)
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", r.Alert, sev)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s has no summary", r.Alert)
			}
			exprs = append(exprs, r.Expr)
		}
	}
	for _, want := range []string{"GaleLogSyncFailed", "GaleLogDamaged", "GaleSinkUnavailable", "GaleDeadLettersRising",
		"GaleCompleteLatencyHigh", "GaleBoltCapacityHigh"} {
		if !alerts[want] {
			t.Errorf("%s has no alert %s", rulesFile, want)
		}
	}
	_, fams := scrape(t, trafficServe(t).URL())
	named := map[string]bool{}
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			named[n] = true
		}
	}
	var missing []string
	for n := range named {
		base := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && fams[b] != nil && fams[b].GetType().String() == "HISTOGRAM" {
				base = b
			}
		}
		if fams[base] == nil {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("named by the dashboard or the rules but not in gale serve's /metrics: %v", missing)
	}
	if len(named) < 30 {
		t.Errorf("only %d metrics named; the regexp finds too little?", len(named))
	}
}

// promtool returns the path of promtool, skipping the test if there is none
// (failing it if GALE_TEST_PROMTOOL=1, as .ci/run sets).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("GALE_TEST_PROMTOOL") == "1" {
			t.Fatalf("GALE_TEST_PROMTOOL=1 but no promtool in PATH: %v (apt-get install prometheus)", err)
		}
		t.Skip("no promtool in PATH (apt-get install prometheus; GALE_TEST_PROMTOOL=1 makes this a failure)")
	}
	return p
}

// TestPromtoolChecksRulesAndServeMetrics: promtool accepts the alert rules, their
// unit tests pass, the dashboard's queries parse, and it lints a real scrape of
// gale serve without a complaint.
func TestPromtoolChecksRulesAndServeMetrics(t *testing.T) {
	bin := promtool(t)
	if out, err := exec.Command(bin, "check", "rules", rulesFile).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	// The rules' unit tests: each alert fires on the series it is for, and not before its for:.
	if out, err := exec.Command(bin, "test", "rules", rulesTestFile).CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
	// The dashboard's queries parse: each, with Grafana's variables given values,
	// as a recording rule that promtool checks.
	var rec strings.Builder
	rec.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	for i, e := range dashboardExprs(t) {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&rec, "      - record: gale:dashboard:%d\n        expr: %s\n", i, q)
	}
	recFile := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(recFile, []byte(rec.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "rules", recFile).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries: promtool check rules: %v\n%s", err, out)
	}
	text, _ := scrape(t, trafficServe(t).URL())
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics on gale serve's /metrics: %v\n%s", err, out)
	}
}
