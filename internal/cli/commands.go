package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// ExitError carries a process exit status without printing anything more.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

func (a *App) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           a.Name,
		Short:         "Stream processing whose acknowledgements mean what they say",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(a.serveCmd(), topCmd(), a.sinkCmd(), logCmd(), natsCmd(),
		a.workerCmd(), a.submitCmd(), clusterCmd(), a.componentsCmd(), versionCmd())
	root.AddCommand(stormActionCmds()...)
	for _, c := range a.Commands {
		root.AddCommand(c())
	}
	// cobra prints Version through this template for --version: the same text as
	// gale version. The flag is declared here so that it has no -v (verbose, to many).
	root.Version = buildVersionText()
	root.SetVersionTemplate("{{.Version}}")
	root.Flags().Bool("version", false, "print gale's version, commit and Go version (as gale version does)")
	// cobra adds its completion command at Execute; added now, it is in the tree
	// that refuseUnknownSubcommands walks.
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command under c that only groups others
// refuse an unknown subcommand as a usage error (exit 2) naming the nearest one:
// cobra would show the group's help and exit 0, as if the command had run. A group
// given no word still shows its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
		return nil
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	// The group's flags are parsed before its arguments are checked: in
	// "gale log chek --data x", the misspelt command is the error to report, not
	// the flag that belongs to the command meant.
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if words := cmd.Flags().Args(); len(words) > 0 {
			return unknownCommand(cmd, words[0])
		}
		return err
	})
}

// unknownCommand is the error for a word that is none of group c's commands.
func unknownCommand(c *cobra.Command, word string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, set only when it suggests itself
	}
	if s := c.SuggestionsFor(word); len(s) > 0 {
		for i := range s {
			s[i] = strconv.Quote(s[i])
		}
		alts := s[len(s)-1]
		if len(s) > 1 {
			alts = strings.Join(s[:len(s)-1], ", ") + " or " + alts
		}
		return fmt.Errorf("unknown command %q for %q: did you mean %s?", word, c.CommandPath(), alts)
	}
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(names) > 5 {
		return fmt.Errorf("unknown command %q for %q (%s --help lists its commands)", word, c.CommandPath(), c.CommandPath())
	}
	return fmt.Errorf("unknown command %q for %q (its commands: %s)", word, c.CommandPath(), strings.Join(names, ", "))
}
