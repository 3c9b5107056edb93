package ui_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// browserNames are the Chromium executables headlessDOM looks for in PATH, in order.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// bodyReady matches the page's <body> once app.js has set data-ready: "1" after the first
// render of the current page with data, "error" (message in #error) when loading failed.
var bodyReady = regexp.MustCompile(`<body[^>]*\sdata-ready="[^"]+"`)

// headlessDOM loads url in headless Chromium and returns the serialized DOM after the page's
// JS fetched its JSON and rendered, that is once <body> carries data-ready. The test is
// skipped when no browser is in PATH, unless GALE_TEST_BROWSER=1, which makes that a failure.
//
// It runs chromium --dump-dom with --virtual-time-budget. Virtual time advances only while
// the page is idle and stands still while a network fetch is pending, so the dump comes
// after the page's fetches however slow the server is (checked against a server answering
// each request after 8 s with a budget of 3 s), and the budget only bounds how much
// timer-driven work (the page's 2 s refresh loop) runs before the dump. A dump without
// data-ready is retried once with a larger budget; the whole call is limited to 60 s.
func headlessDOM(t *testing.T, url string) string {
	t.Helper()
	bin := findBrowser()
	if bin == "" {
		msg := fmt.Sprintf("no Chromium in PATH (looked for %s); install Debian's chromium package: apt-get install chromium",
			strings.Join(browserNames, ", "))
		if os.Getenv("GALE_TEST_BROWSER") == "1" {
			t.Fatal("GALE_TEST_BROWSER=1: " + msg)
		}
		t.Skip(msg + " (or set GALE_TEST_BROWSER=1 to make this a failure)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var problems []string
	for _, budget := range []int{5000, 15000} {
		dom, err := runHeadless(ctx, bin, t.TempDir(), url, budget)
		if err == nil && bodyReady.MatchString(dom) {
			if len(problems) > 0 {
				t.Logf("headlessDOM %s: ready on a retry after: %s", url, strings.Join(problems, "; "))
			}
			return dom
		}
		if err == nil {
			err = fmt.Errorf("page never set data-ready on <body> (virtual time budget %d ms); DOM:\n%s", budget, tail(dom, 4000))
		}
		problems = append(problems, err.Error())
		if ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("headlessDOM %s with %s:\n%s", url, bin, strings.Join(problems, "\n"))
	return ""
}

// findBrowser returns the path of the first of browserNames found in PATH, or "".
func findBrowser() string {
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// runHeadless runs one headless Chromium with a fresh profile in dir and returns what
// --dump-dom printed.
func runHeadless(ctx context.Context, bin, dir, url string, budgetMS int) (string, error) {
	cmd := exec.CommandContext(ctx, bin,
		"--headless",
		"--no-sandbox", // CI runs as root, where Chromium's sandbox refuses to start
		"--disable-gpu",
		"--disable-dev-shm-usage",
		"--no-first-run",
		"--no-default-browser-check",
		"--disable-extensions",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--mute-audio",
		"--window-size=1280,1024",
		"--user-data-dir="+dir,
		fmt.Sprintf("--virtual-time-budget=%d", budgetMS),
		"--dump-dom",
		url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second // don't hang on pipes a leftover child process holds
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("timed out (%v): a fetch of the page never finished (virtual time stands still while one is pending); chromium's stderr:\n%s",
			ctx.Err(), browserLog(stderr.String()))
	}
	if err != nil {
		return "", fmt.Errorf("%v; chromium's stderr:\n%s", err, browserLog(stderr.String()))
	}
	return stdout.String(), nil
}

// browserLog returns the end of chromium's stderr without its D-Bus complaints, which a
// machine without a session bus always gets and which say nothing about the page.
func browserLog(s string) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.Contains(line, ":ERROR:dbus/") && strings.TrimSpace(line) != "" {
			keep = append(keep, line)
		}
	}
	return tail(strings.Join(keep, "\n"), 2000)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
