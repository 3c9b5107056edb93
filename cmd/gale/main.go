// Command gale runs gale's jobs. `gale wordcount` is the main example job.
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status without printing anything more.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	root := &cobra.Command{
		Use:           "gale",
		Short:         "gale: stream processing whose acknowledgements mean what they say",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(wordcountCmd(), serveCmd(), ingestCmd(), ordersCmd(), benchCmd())
	if err := root.Execute(); err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "gale:") {
			msg = "gale: " + msg
		}
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(2)
	}
}
