package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// reorderArgs moves a command's flags in front of its positional arguments,
// so that `stallfs mount SRC MNT --daemon` works: urfave/cli v2 (like the
// flag package) stops parsing flags at the first positional argument.
// Positional arguments go after a "--", so a path that starts with "-" is
// still a path. Unknown flags are kept and fail later as unknown flags. The
// flags of a subcommand (`stallfs order show MNT --epoch 2`) are moved the
// same way.
func reorderArgs(app *cli.App, args []string) []string {
	i := 1
	for i < len(args) && isFlagToken(args[i]) {
		if args[i] == "--" {
			return args
		}
		i++
	}
	if i >= len(args) {
		return args
	}
	var cmd *cli.Command
	for _, c := range app.Commands {
		if c.HasName(args[i]) {
			cmd = c
		}
	}
	if cmd == nil {
		return args
	}
	// Descend into subcommands named right after their parent
	// (`stallfs cache info MNT --json`): the leaf's flags are reordered.
	for i+1 < len(args) && len(cmd.Subcommands) > 0 {
		sub := cmd.Command(args[i+1])
		if sub == nil {
			break
		}
		cmd = sub
		i++
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, pos []string
	rest := args[i+1:]
	for j := 0; j < len(rest); j++ {
		t := rest[j]
		if t == "--" {
			pos = append(pos, rest[j+1:]...)
			break
		}
		if !isFlagToken(t) {
			pos = append(pos, t)
			continue
		}
		flags = append(flags, t)
		name := strings.TrimLeft(t, "-")
		if !strings.Contains(name, "=") && takesValue[name] && j+1 < len(rest) {
			flags = append(flags, rest[j+1])
			j++
		}
	}
	out := make([]string, 0, len(args)+1)
	out = append(out, args[:i+1]...)
	out = append(out, flags...)
	if len(pos) > 0 {
		out = append(out, "--")
		out = append(out, pos...)
	}
	return out
}

func isFlagToken(s string) bool { return len(s) > 1 && s[0] == '-' }
