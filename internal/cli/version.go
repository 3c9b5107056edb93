package cli

import (
	"fmt"
	"path"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// galeModule is gale's module path: a binary whose main module is another is a
// user's, over package app.
const galeModule = "github.com/gale-stream/gale"

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
		// A user's binary over package app: its own module first, then gale's.
		fmt.Fprintf(&b, "%s version %s (%s)\n", path.Base(bi.Main.Path), version, bi.Main.Path)
		version = "unknown"
		for _, d := range bi.Deps {
			if d.Path != galeModule {
				continue
			}
			version = d.Version
			if d.Replace != nil {
				version = fmt.Sprintf("%s, replaced by %s", strings.NewReplacer("(devel)", "devel").Replace(d.Version), d.Replace.Path)
				if d.Replace.Version != "" {
					version += " " + d.Replace.Version
				}
			}
		}
	}
	fmt.Fprintf(&b, "gale version %s\n", version)
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
