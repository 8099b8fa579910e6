package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

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
			&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "also when its daemon does not answer (stopped or hung): abort the FUSE connection, then detach", EnvVars: []string{"STALLFS_UNMOUNT_FORCE"}},
		},
		Action: func(c *cli.Context) error {
			if err := unmount(c.Context, c.Args().Slice(), c.Bool("lazy"), c.Bool("force")); err != nil {
				return fmt.Errorf("unmount: %w", err)
			}
			return nil
		},
	}
}

// unmountWait bounds how long unmount waits for the daemon that served the
// mount to exit.
const unmountWait = 10 * time.Second

// unmount validates the arguments and unmounts a FUSE mount; with force,
// as forceUnmount does (at once, also when the daemon hangs). Unless lazy,
// it then waits (boundedly) for the stallfs process that served the mount
// to exit, so that a new mount may take its place (and its cache) at once.
func unmount(ctx context.Context, args []string, lazy, force bool) error {
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
	if force {
		return forceUnmount(path)
	}
	pid := 0
	if state == mountMounted {
		pid = mountPID(ctx, path)
	}
	if err := unmountPath(path, lazy); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("%q is busy (open files or a working directory inside); retry with --lazy (or --force if its daemon does not answer)", path)
		}
		return err
	}
	if pid > 0 && !lazy {
		ctx, cancel := context.WithTimeout(ctx, unmountWait)
		defer cancel()
		if !waitProcessExit(ctx, pid) {
			return fmt.Errorf("unmounted %q, but its stallfs process %d is still running after %v", path, pid, unmountWait)
		}
	}
	return nil
}
