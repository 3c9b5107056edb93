package metrics

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RegisterProcess adds what every gale process exports besides its own metrics:
// the Go runtime's go_* and the process's process_* collectors, and gale_build_info
// (always 1; its labels say which build is running).
func RegisterProcess(reg prometheus.Registerer) error {
	version, goversion := BuildVersion()
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gale_build_info",
		Help:        "Always 1; version is the gale module's version (devel for a build from a work tree) and goversion the Go toolchain's.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": goversion}})
	info.Set(1)
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		info,
	} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: registering the process metrics: %w", err)
		}
	}
	return nil
}

// BuildVersion is the main module's version and the Go version from the binary's
// build information ("unknown" for either when it is missing).
func BuildVersion() (version, goversion string) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown", "unknown"
	}
	version = bi.Main.Version
	switch version {
	case "", "(devel)":
		version = "devel"
	}
	return version, bi.GoVersion
}
