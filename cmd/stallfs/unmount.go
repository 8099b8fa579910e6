package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// unmountCommand is `stallfs unmount MOUNTPOINT [--lazy]`. It works on a
// live mount and on a stale one left by a crashed stallfs.
func (a *cliApp) unmountCommand() *cli.Command {
	return &cli.Command{
		Name:      "unmount",
		Aliases:   []string{"umount"},
		Usage:     "unmount a stallfs mount (also a stale one left by a crash)",
		ArgsUsage: "MOUNTPOINT",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "lazy", Aliases: []string{"z"}, Usage: "detach now even if files are open; finish when they close", EnvVars: []string{"STALLFS_UNMOUNT_LAZY"}},
		},
		Action: func(c *cli.Context) error {
			if err := unmount(c.Args().Slice(), c.Bool("lazy")); err != nil {
				return fmt.Errorf("unmount: %w", err)
			}
			return nil
		},
	}
}

// unmount validates the arguments and unmounts a FUSE mount.
func unmount(args []string, lazy bool) error {
	if len(args) != 1 {
		return usagef("expected MOUNTPOINT, got %d argument(s)", len(args))
	}
	if args[0] == "" {
		return usagef("empty mountpoint")
	}
	path, err := filepath.Abs(args[0])
	if err != nil {
		return usagef("mountpoint %q: %w", args[0], err)
	}
	state, err := inspectMountpoint(path)
	if err != nil {
		return err
	}
	if state == mountFree {
		return usagef("%q is not a mount", path)
	}
	e, err := findMount(path)
	if err != nil {
		return err
	}
	if e == nil {
		return usagef("%q is not in the mount table", path)
	}
	if !strings.HasPrefix(e.FSType, "fuse") {
		return usagef("%q is a %s mount, not a stallfs mount", path, e.FSType)
	}
	if err := unmountPath(path, lazy); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%q is busy (open files or a working directory inside); retry with --lazy", path)
		}
		return err
	}
	return nil
}
