package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/fs"
)

// unmountGrace bounds how long a signalled mount waits for open files to
// be closed after it detached.
const unmountGrace = 3 * time.Second

// mountCommand is `stallfs mount SOURCE MOUNTPOINT [flags]`.
func (a *cliApp) mountCommand() *cli.Command {
	openers := sourceOpeners()
	flags := []cli.Flag{
		&cli.BoolFlag{Name: "daemon", Usage: "run in the background; return once the mount is ready", EnvVars: []string{"STALLFS_DAEMON"}},
		&cli.BoolFlag{Name: "allow-other", Usage: "let users other than the mounter access the mount", EnvVars: []string{"STALLFS_ALLOW_OTHER"}},
		&cli.StringFlag{Name: "read-ahead", Usage: "kernel readahead `SIZE` (e.g. 1MiB; empty: kernel default)", EnvVars: []string{"STALLFS_READ_AHEAD"}},
		&cli.BoolFlag{Name: "kernel-cache", Usage: "fast hit path: the kernel keeps the pages of files the cache tiers hold (others are dropped) and opens files without asking; stats then count opens (lookups, stat too) as hits (default: direct I/O, every read counted)", EnvVars: []string{"STALLFS_KERNEL_CACHE"}},
		&cli.StringFlag{Name: "chunk-size", Value: "4MiB", Usage: "cache item `SIZE`: files up to it are one item, larger ones are split", EnvVars: []string{"STALLFS_CHUNK_SIZE"}},
		&cli.StringFlag{Name: "attr-timeout", Value: "1h", Usage: "`DURATION` the kernel caches names and attributes (remount to see a changed source)", EnvVars: []string{"STALLFS_ATTR_TIMEOUT"}},
		&cli.BoolFlag{Name: "force", Usage: "recover a stale mountpoint left by a crashed stallfs (lazy unmount, then mount)", EnvVars: []string{"STALLFS_FORCE"}},
		&cli.BoolFlag{Name: "debug-fuse", Usage: "log every FUSE request (very verbose)", EnvVars: []string{"STALLFS_DEBUG_FUSE"}},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "`LEVEL`: debug, info, warn or error", EnvVars: []string{"STALLFS_LOG_LEVEL"}},
		&cli.StringFlag{Name: "log-file", Usage: "append logs to `FILE` (default: stderr; /dev/null with --daemon)", EnvVars: []string{"STALLFS_LOG_FILE"}},
	}
	return &cli.Command{
		Name:      "mount",
		Usage:     "mount SOURCE (a directory, file:///path, s3://bucket/prefix, az://account/container) read-only at MOUNTPOINT",
		ArgsUsage: "SOURCE MOUNTPOINT",
		Flags:     append(append(flags, pipelineFlags()...), sourceFlags(openers)...),
		Action: func(c *cli.Context) error {
			if err := a.mount(c, openers); err != nil {
				return fmt.Errorf("mount: %w", err)
			}
			return nil
		},
	}
}

// readMountFlags collects the mount command's flags as typed.
func readMountFlags(c *cli.Context) mountFlags {
	return mountFlags{
		Args:        c.Args().Slice(),
		Daemon:      c.Bool("daemon"),
		AllowOther:  c.Bool("allow-other"),
		KernelCache: c.Bool("kernel-cache"),
		Force:       c.Bool("force"),
		DebugFUSE:   c.Bool("debug-fuse"),
		ReadAhead:   c.String("read-ahead"),
		ChunkSize:   c.String("chunk-size"),
		AttrTimeout: c.String("attr-timeout"),
		LogLevel:    c.String("log-level"),
		LogFile:     c.String("log-file"),
	}
}

// mount validates the input, then either starts a daemon child or mounts
// in the foreground until a signal or an external unmount.
func (a *cliApp) mount(c *cli.Context, openers map[string]sourceOpener) error {
	raw := readMountFlags(c)
	var err error
	if raw.Args, err = impliedSource(c, openers, raw.Args); err != nil {
		return err
	}
	bf, err := a.applyBlobfuse2(c, &raw) // --config-file
	if err != nil {
		return err
	}
	cfg, err := raw.config(sourceSchemes(openers))
	if err != nil {
		return err
	}
	if cfg.Pipeline, err = readPipelineConfig(c, bf); err != nil {
		return err
	}
	ready, isChild, err := readyPipeFromEnv(a.getenv)
	if err != nil {
		return err
	}
	if cfg.Daemon && !isChild {
		// Validate in the parent too, so that bad input exits 2 here and
		// not in a detached child.
		if _, err := checkMountTarget(cfg); err != nil {
			return err
		}
		return a.startDaemon(cfg)
	}
	if isChild {
		// Paths are absolute by now; do not keep the caller's working
		// directory busy.
		_ = os.Chdir("/")
	}
	err = a.mountForeground(c, cfg, openers, ready)
	if ready != nil {
		ready.fail(err) // no-op once readiness was reported
	}
	return err
}

// checkMountTarget checks the mountpoint; it reports whether a stale mount
// must be detached first (only with --force).
func checkMountTarget(cfg mountConfig) (stale bool, err error) {
	state, err := inspectMountpoint(cfg.Mountpoint)
	if err != nil {
		return false, err
	}
	switch state {
	case mountStale:
		if !cfg.Force {
			return true, usagef("%s", staleMessage(cfg.Mountpoint))
		}
		return true, nil
	case mountMounted:
		return false, usagef("mountpoint %q is already a mount; unmount it first (`stallfs unmount %s`)", cfg.Mountpoint, cfg.Mountpoint)
	}
	return false, nil
}

// mountForeground mounts and serves until SIGINT/SIGTERM/SIGHUP (clean unmount,
// status 0) or until the file system is unmounted from outside.
func (a *cliApp) mountForeground(c *cli.Context, cfg mountConfig, openers map[string]sourceOpener, ready *readyPipe) error {
	log, closeLog, err := newLogger(cfg, a.stderr)
	if err != nil {
		return err
	}
	defer closeLog()

	stale, err := checkMountTarget(cfg)
	if err != nil {
		return err
	}
	// SIGHUP too: a foreground mount whose terminal closes unmounts
	// cleanly instead of leaving a stale mountpoint.
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	b, err := openers[cfg.Source.Scheme].open(ctx, c, cfg.Source, log)
	if err != nil {
		return err
	}
	defer b.Close()

	if stale {
		log.Warn("detaching stale mount (--force)", "mountpoint", cfg.Mountpoint)
		if err := fs.ForceUnmount(cfg.Mountpoint); err != nil {
			return fmt.Errorf("recover stale mountpoint: %w", err)
		}
	}

	pl, b, err := newPipeline(cfg.Pipeline, b, log)
	if err != nil {
		return err
	}
	defer pl.close()

	log.Info("mounting", "config", cfg.String())
	opts := cfg.fsOptions(log)
	pl.apply(&opts)
	m, err := fs.New(ctx, cfg.Mountpoint, b, opts)
	if err != nil {
		return fmt.Errorf("%s at %s: %w", b.String(), cfg.Mountpoint, err)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		setHeapLimit(opts.BufferBytes)
	}
	log.Info("mounted", "source", b.String(), "mountpoint", cfg.Mountpoint, "pid", os.Getpid())
	if ready != nil {
		ready.ok()
	}

	done := make(chan struct{})
	go func() {
		m.Wait()
		close(done)
	}()
	select {
	case <-done:
		log.Info("unmounted from outside", "mountpoint", cfg.Mountpoint)
		return nil
	case <-ctx.Done():
	}
	stop() // a second signal now kills the process the default way
	log.Info("signal received; unmounting", "mountpoint", cfg.Mountpoint)
	if err := m.Unmount(); err != nil {
		return fmt.Errorf("unmount %s: %w", cfg.Mountpoint, err)
	}
	// A file still open keeps a detached mount's connection alive; do not
	// wait for its reader to close it: exiting ends the connection.
	grace := time.NewTimer(unmountGrace)
	defer grace.Stop()
	select {
	case <-done:
		log.Info("unmounted", "mountpoint", cfg.Mountpoint)
	case <-grace.C:
		log.Warn("detached with files still open; exiting, their readers will see errors", "mountpoint", cfg.Mountpoint)
	}
	return nil
}

// newLogger builds the text logger: to --log-file (appended) or stderr.
func newLogger(cfg mountConfig, stderr io.Writer) (*slog.Logger, func(), error) {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFile == "" {
		return slog.New(slog.NewTextHandler(stderr, opts)), func() {}, nil
	}
	f, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, usagef("--log-file %q: %w", cfg.LogFile, pathErrCause(err))
	}
	return slog.New(slog.NewTextHandler(f, opts)), func() { f.Close() }, nil
}

// setHeapLimit sets a soft limit on the Go heap once the mount is up:
// what is live now (the tree, the stats table, the prefetch layout: they
// grow with the dataset and never shrink) plus room for the read path
// (fill buffers, go-fuse's request buffers) and the staging buffer. The
// cache's bytes live off the heap, so RSS stays near the budget. It is
// set only now: a fixed limit below the live heap of a large tree made
// the collector run without pause while the mount listed and served
// (1.28M files: a first find 3.8x the source's, 1.5x without it).
func setHeapLimit(stage int64) {
	if stage <= 0 {
		stage = 64 << 20
	}
	debug.FreeOSMemory() // collect the listing's garbage and return it
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	debug.SetMemoryLimit(int64(ms.HeapAlloc) + 96<<20 + stage)
}
