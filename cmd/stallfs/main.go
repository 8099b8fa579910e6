// Command stallfs mounts a training dataset read-only through FUSE.
//
// Exit status: 0 on success, 2 for bad input (flags, arguments, sources,
// mountpoints; nothing is mounted and one line on stderr names the
// problem), 1 for failures after the input was accepted.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdout, os.Stderr))
}

// run executes the command line args (args[0] is the program) and returns
// the process exit status. Errors are printed to stderr as one line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &cliApp{stdout: stdout, stderr: stderr, argv: args, getenv: os.Getenv}
	app := a.newApp()
	err := app.RunContext(ctx, reorderArgs(app, args))
	if err == nil && a.helpNotFound != "" {
		err = usagef("help: unknown command %q", a.helpNotFound)
	}
	if err == nil {
		return 0
	}
	code := exitCode(err)
	if msg := oneLine(err.Error()); msg != "" {
		fmt.Fprintf(stderr, "stallfs: %s\n", msg)
	}
	return code
}

// cliApp holds what the commands need from the process: its streams, its
// raw argv (re-executed by --daemon) and its environment.
type cliApp struct {
	stdout, stderr io.Writer
	argv           []string
	getenv         func(string) string

	helpNotFound string // set by `stallfs help NAME` for an unknown NAME
}

func (a *cliApp) newApp() *cli.App {
	app := &cli.App{
		Name:            "stallfs",
		Usage:           "a read-only FUSE file system for deep-learning training data",
		UsageText:       "stallfs mount SOURCE MOUNTPOINT [flags]\nstallfs unmount MOUNTPOINT [--lazy]\nstallfs version",
		HideVersion:     true,
		Writer:          a.stdout,
		ErrWriter:       a.stderr,
		ExitErrHandler:  func(*cli.Context, error) {}, // run() prints and picks the status
		OnUsageError:    onUsageError,
		CommandNotFound: func(_ *cli.Context, name string) { a.helpNotFound = name },
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown command %q (run `stallfs help`)", c.Args().First())
			}
			_ = cli.ShowAppHelp(c)
			return usagef("missing command")
		},
		Commands: []*cli.Command{
			a.mountCommand(),
			a.unmountCommand(),
			a.versionCommand(),
			statsCommand(),
			cacheCommand(),
			orderCommand(),
			simulateCommand(),
		},
	}
	for _, c := range app.Commands {
		c.OnUsageError = onUsageError
	}
	return app
}

// onUsageError turns urfave/cli's flag parsing errors (unknown flag, a
// malformed value from an environment variable) into exit status 2.
func onUsageError(c *cli.Context, err error, isSubcommand bool) error {
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
		dash := "--"
		if len(name) == 1 {
			dash = "-"
		}
		err = fmt.Errorf("unknown flag %s%s", dash, name)
	}
	if isSubcommand && c.Command != nil {
		return usagef("%s: %w", c.Command.Name, err)
	}
	return usagef("%w", err)
}

// oneLine joins a multi-line message so that every error is one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
