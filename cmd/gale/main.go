// Command gale runs gale's jobs. `gale wordcount` is the main example job.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() { os.Exit(run(os.Args[1:])) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "gale",
		Short:         "gale: stream processing whose acknowledgements mean what they say",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(wordcountCmd(), serveCmd(), ingestCmd(), ordersCmd(), benchCmd(), topCmd(), sinkCmd(), logCmd(), natsCmd(),
		workerCmd(), submitCmd(), clusterCmd(), versionCmd())
	root.AddCommand(stormActionCmds()...)
	// cobra prints Version through this template for --version: the same text as
	// gale version. The flag is declared here so that it has no -v (verbose, to many).
	root.Version = buildVersionText()
	root.SetVersionTemplate("{{.Version}}")
	root.Flags().Bool("version", false, "print gale's version, commit and Go version (as gale version does)")
	return root
}

// run executes the command line and returns the exit status.
func run(args []string) int { return runWith(args, os.Stdout, os.Stderr) }

// runWith is run writing to stdout and stderr (tests run the command tree in their
// own process this way).
func runWith(args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "gale:") {
			msg = "gale: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 2
	}
	return 0
}
