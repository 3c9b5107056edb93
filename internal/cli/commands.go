package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// ExitError carries a process exit status without printing anything more.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

func (a *App) newRoot() *cobra.Command {
	root := a.galeRoot()
	for _, c := range a.Commands {
		root.AddCommand(c())
	}
	// cobra adds its completion command at Execute; added now, it is in the tree
	// that refuseUnknownSubcommands walks.
	root.InitDefaultCompletionCmd()
	refuseUnknownSubcommands(root)
	return root
}

// galeRoot is the root command with gale's own commands, without the program's.
func (a *App) galeRoot() *cobra.Command {
	name := a.Name
	if name == "" {
		name = "gale" // an App that app.New did not make (app.App's zero value)
	}
	root := &cobra.Command{
		Use:           name,
		Short:         "Stream processing whose acknowledgements mean what they say",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(a.serveCmd(), topCmd(), a.sinkCmd(), logCmd(), natsCmd(),
		a.workerCmd(), a.submitCmd(), clusterCmd(), a.componentsCmd(), a.runCmd(), versionCmd())
	root.AddCommand(stormActionCmds()...)
	// cobra prints Version through this template for --version: the same text as
	// gale version. The flag is declared here so that it has no -v (verbose, to many).
	root.Version = buildVersionText()
	root.SetVersionTemplate("{{.Version}}")
	root.Flags().Bool("version", false, "print gale's version, commit and Go version (as gale version does)")
	return root
}

// CheckCommands returns an error per command of a.Commands that could not run:
// a constructor that returns nil or panics, a command without a name, and a name
// or alias that is gale's (serve, version, help, completion...) or another
// command's of the program. cobra takes two commands of one name and runs the
// first: the second would never run, and nothing would say so. It calls each
// constructor once.
func (a *App) CheckCommands() []error {
	root := a.galeRoot()
	root.InitDefaultCompletionCmd()
	taken := map[string]string{"help": "gale's help command"}
	for _, c := range root.Commands() {
		for _, n := range append([]string{c.Name()}, c.Aliases...) {
			taken[n] = fmt.Sprintf("gale's %s command", c.Name())
		}
	}
	var errs []error
	for i, newCmd := range a.Commands {
		c, err := callCommand(newCmd)
		if err != nil {
			errs = append(errs, fmt.Errorf("WithCommand #%d: %w", i+1, err))
			continue
		}
		if c.Name() == "" {
			errs = append(errs, fmt.Errorf("WithCommand #%d: a command without a name (its Use is %q)", i+1, c.Use))
			continue
		}
		for _, n := range append([]string{c.Name()}, c.Aliases...) {
			what := fmt.Sprintf("command %q", c.Name())
			if n != c.Name() {
				what += fmt.Sprintf(" (alias %q)", n)
			}
			if by, ok := taken[n]; ok {
				errs = append(errs, fmt.Errorf("WithCommand: %s: %q names %s already (of two commands of one name, the second never runs)", what, n, by))
				continue
			}
			taken[n] = fmt.Sprintf("the program's %s command (an earlier WithCommand)", c.Name())
		}
	}
	return errs
}

// callCommand calls a WithCommand constructor, turning nil and a panic into errors.
func callCommand(newCmd func() *cobra.Command) (c *cobra.Command, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, err = nil, fmt.Errorf("its function panicked: %v", p)
		}
	}()
	if c = newCmd(); c == nil {
		return nil, errors.New("its function returned a nil command")
	}
	return c, nil
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
