package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// versionText is what gale version and gale --version print: the module's version,
// the commit and the Go version, from the binary's build information (nil: none).
// A build without VCS stamping (go build -buildvcs=false, as .ci/run builds, or a
// build outside a git checkout) has no commit: it says so rather than failing.
func versionText(bi *debug.BuildInfo) string {
	version, goVersion, platform := "unknown", runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
	var revision, when string
	var modified bool
	if bi != nil {
		// "(devel)" is what Go records for a build without a module version; shown
		// as gale_build_info's version label shows it.
		version = strings.NewReplacer("(devel)", "devel").Replace(bi.Main.Version)
		if version == "" {
			version = "unknown"
		}
		goVersion = bi.GoVersion
		var goos, goarch string
		for _, s := range bi.Settings {
			switch s.Key {
			case "GOOS":
				goos = s.Value
			case "GOARCH":
				goarch = s.Value
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if goos != "" && goarch != "" {
			platform = goos + "/" + goarch
		}
	}
	var b strings.Builder
	if bi != nil && bi.Main.Path != "" && bi.Main.Path != galeModule {
		// A program's own binary (package app): its main module is the program's,
		// whose version and commit these are; gale's is the dependency's.
		fmt.Fprintf(&b, "gale version %s\n", depVersion(bi, galeModule))
		fmt.Fprintf(&b, "program: %s version %s\n", bi.Main.Path, version)
	} else {
		fmt.Fprintf(&b, "gale version %s\n", version)
	}
	if revision == "" {
		b.WriteString("commit: unknown (the build has no VCS information: go run, a build with -buildvcs=false, or one outside a git checkout records none)\n")
	} else {
		var about []string
		if when != "" {
			about = append(about, when)
		}
		if modified {
			about = append(about, "modified")
		}
		fmt.Fprintf(&b, "commit: %s", revision)
		if len(about) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "go: %s %s\n", goVersion, platform)
	return b.String()
}

// galeModule is gale's module path.
const galeModule = "github.com/gale-stream/gale"

// depVersion is the version of dependency path in bi: its replacement's if it is
// replaced (a local directory has none: "devel"), "unknown" if bi lacks it.
func depVersion(bi *debug.BuildInfo, path string) string {
	for _, d := range bi.Deps {
		if d.Path != path {
			continue
		}
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
		}
		if v == "" || v == "(devel)" {
			return "devel"
		}
		return v
	}
	return "unknown"
}

// buildVersionText is this binary's versionText.
func buildVersionText() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return versionText(bi)
}

func versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gale's version, commit and Go version (as gale --version does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), buildVersionText())
			return err
		},
	}
}
