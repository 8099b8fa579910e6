package main

import (
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/stallfs/stallfs/fs"
)

// Limits of the size flags. The kernel takes max_readahead as a 32-bit
// value; a chunk is held in memory whole, so it stays well below a GiB.
const (
	maxReadAhead = 1 << 30
	maxChunkSize = 1 << 30
)

// mountFlags are the mount command's inputs as typed, before validation.
// Only mountFlags.config turns them into a mountConfig.
type mountFlags struct {
	Args        []string // SOURCE MOUNTPOINT
	Daemon      bool
	AllowOther  bool
	KernelCache bool
	Force       bool
	DebugFUSE   bool
	ReadAhead   string // size, "" = kernel default
	ChunkSize   string // size
	AttrTimeout string // duration
	LogLevel    string
	LogFile     string
}

// mountConfig is the validated configuration of one mount. It is built
// once by mountFlags.config and converted to each package's Options.
type mountConfig struct {
	Source      *url.URL // scheme is lower case; a plain path becomes file://
	Mountpoint  string   // absolute, cleaned
	Daemon      bool
	AllowOther  bool
	KernelCache bool
	Force       bool
	DebugFUSE   bool
	ReadAhead   int64 // bytes, 0 = kernel default
	ChunkSize   int64 // bytes
	AttrTimeout time.Duration
	LogLevel    slog.Level
	LogFile     string // "" = stderr
	Pipeline    pipelineConfig
}

// config validates f without touching the file system beyond making paths
// absolute. Every error is a usage error.
func (f mountFlags) config(knownSchemes []string) (mountConfig, error) {
	var cfg mountConfig
	if len(f.Args) != 2 {
		return cfg, usagef("expected SOURCE and MOUNTPOINT, got %d argument(s)", len(f.Args))
	}
	src, err := parseSource(f.Args[0], knownSchemes)
	if err != nil {
		return cfg, err
	}
	cfg.Source = src
	if f.Args[1] == "" {
		return cfg, usagef("empty mountpoint")
	}
	mnt, err := filepath.Abs(f.Args[1])
	if err != nil {
		return cfg, usagef("mountpoint %q: %w", f.Args[1], err)
	}
	cfg.Mountpoint = mnt

	cfg.Daemon, cfg.AllowOther, cfg.KernelCache = f.Daemon, f.AllowOther, f.KernelCache
	cfg.Force, cfg.DebugFUSE = f.Force, f.DebugFUSE
	if cfg.ReadAhead, err = parseSize("read-ahead", f.ReadAhead, 0, maxReadAhead); err != nil {
		return cfg, err
	}
	if cfg.ChunkSize, err = parseSize("chunk-size", f.ChunkSize, 4096, maxChunkSize); err != nil {
		return cfg, err
	}
	if cfg.AttrTimeout, err = parseDuration("attr-timeout", f.AttrTimeout); err != nil {
		return cfg, err
	}
	if cfg.LogLevel, err = parseLogLevel(f.LogLevel); err != nil {
		return cfg, err
	}
	if f.LogFile != "" {
		if cfg.LogFile, err = filepath.Abs(f.LogFile); err != nil {
			return cfg, usagef("log-file %q: %w", f.LogFile, err)
		}
	}
	return cfg, nil
}

// fsOptions converts the configuration to the fs package's options.
func (cfg mountConfig) fsOptions(log *slog.Logger) fs.Options {
	return fs.Options{
		KernelCache:  cfg.KernelCache,
		AllowOther:   cfg.AllowOther,
		ReadAhead:    cfg.ReadAhead,
		EntryTimeout: cfg.AttrTimeout,
		AttrTimeout:  cfg.AttrTimeout,
		ChunkSize:    cfg.ChunkSize,
		Logger:       log,
		Debug:        cfg.DebugFUSE,
	}
}

// parseSource turns SOURCE into a URL: "scheme://..." for a known scheme,
// anything else is a local path made absolute (file://).
func parseSource(s string, knownSchemes []string) (*url.URL, error) {
	if s == "" {
		return nil, usagef("empty source")
	}
	scheme, _, isURL := strings.Cut(s, "://")
	if !isURL {
		abs, err := filepath.Abs(s)
		if err != nil {
			return nil, usagef("source %q: %w", s, err)
		}
		return &url.URL{Scheme: "file", Path: abs}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, usagef("source %q is not a valid URL: %w", s, errorsUnwrapURL(err))
	}
	u.Scheme = strings.ToLower(scheme)
	known := false
	for _, k := range knownSchemes {
		known = known || k == u.Scheme
	}
	if !known {
		return nil, usagef("unknown source scheme %q in %q (known: %s)", u.Scheme, s, strings.Join(knownSchemes, ", "))
	}
	if u.Scheme == "file" {
		if u.Host != "" && u.Host != "localhost" {
			return nil, usagef("source %q: a file:// URL names a local path (file:///path), not host %q", s, u.Host)
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return nil, usagef("source %q: a file:// URL needs an absolute path (file:///path)", s)
		}
		u.Host = ""
		u.Path = filepath.Clean(u.Path)
	}
	return u, nil
}

// errorsUnwrapURL drops url.Error's repetition of the whole input.
func errorsUnwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// parseSize parses a size such as "4MiB", "1G" or "65536" into bytes within
// [lo, hi]; "" means 0.
func parseSize(flag, s string, lo, hi int64) (int64, error) {
	if s == "" {
		if lo > 0 {
			return 0, usagef("--%s: a size is required", flag)
		}
		return 0, nil
	}
	v, err := humanize.ParseBytes(s)
	if err != nil || v > math.MaxInt64 {
		return 0, usagef("--%s: malformed size %q (examples: 4MiB, 1G, 65536)", flag, s)
	}
	n := int64(v)
	if n < lo || n > hi {
		return 0, usagef("--%s: size %q out of range [%s, %s]", flag, s, humanize.IBytes(uint64(lo)), humanize.IBytes(uint64(hi)))
	}
	return n, nil
}

// parseDuration parses a non-negative Go duration such as "90s" or "1h".
func parseDuration(flag, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, usagef("--%s: malformed duration %q (examples: 30s, 5m, 1h)", flag, s)
	}
	if d < 0 {
		return 0, usagef("--%s: negative duration %q", flag, s)
	}
	return d, nil
}

// parseLogLevel accepts debug, info, warn and error.
func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, usagef("--log-level: unknown level %q (debug, info, warn, error)", s)
}

// String describes the configuration for the startup log line.
func (cfg mountConfig) String() string {
	return fmt.Sprintf("source=%s mountpoint=%s read-ahead=%d chunk-size=%d kernel-cache=%t allow-other=%t attr-timeout=%s",
		cfg.Source.Redacted(), cfg.Mountpoint, cfg.ReadAhead, cfg.ChunkSize, cfg.KernelCache, cfg.AllowOther, cfg.AttrTimeout)
}
