package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

func TestMountFlagsConfig(t *testing.T) {
	good := mountFlags{Args: []string{"/data", "/mnt"}, ChunkSize: "4MiB", AttrTimeout: "1h", LogLevel: "info"}
	cfg, err := good.config([]string{"file"})
	if err != nil {
		t.Fatalf("config(%+v): %v", good, err)
	}
	if cfg.Source.Scheme != "file" || cfg.Source.Path != "/data" || cfg.Mountpoint != "/mnt" {
		t.Errorf("source %v mountpoint %q, want file:///data and /mnt", cfg.Source, cfg.Mountpoint)
	}
	if cfg.ChunkSize != 4<<20 || cfg.ReadAhead != 0 || cfg.AttrTimeout != time.Hour || cfg.LogLevel != slog.LevelInfo {
		t.Errorf("got chunk %d read-ahead %d attr %v level %v", cfg.ChunkSize, cfg.ReadAhead, cfg.AttrTimeout, cfg.LogLevel)
	}
	o := cfg.fsOptions(nil)
	if o.ChunkSize != cfg.ChunkSize || o.EntryTimeout != time.Hour || o.AttrTimeout != time.Hour || o.KernelCache {
		t.Errorf("fsOptions = %+v", o)
	}

	rel := good
	rel.Args = []string{"data", "mnt"}
	rel.ReadAhead, rel.ChunkSize, rel.AttrTimeout, rel.LogLevel = "1G", "65536", "90s", "DEBUG"
	cfg, err = rel.config([]string{"file"})
	if err != nil {
		t.Fatalf("config(%+v): %v", rel, err)
	}
	wd, _ := os.Getwd()
	if cfg.Source.Path != filepath.Join(wd, "data") || cfg.Mountpoint != filepath.Join(wd, "mnt") {
		t.Errorf("relative paths not made absolute: %v %q", cfg.Source, cfg.Mountpoint)
	}
	if cfg.ReadAhead != 1e9 || cfg.ChunkSize != 65536 || cfg.AttrTimeout != 90*time.Second || cfg.LogLevel != slog.LevelDebug {
		t.Errorf("got read-ahead %d chunk %d attr %v level %v", cfg.ReadAhead, cfg.ChunkSize, cfg.AttrTimeout, cfg.LogLevel)
	}
}

// Every bad input is a usage error (exit status 2) whose message names the
// problem.
func TestMountFlagsConfigBadInput(t *testing.T) {
	base := mountFlags{Args: []string{"/data", "/mnt"}, ChunkSize: "4MiB", AttrTimeout: "1h", LogLevel: "info"}
	tests := []struct {
		name string
		edit func(*mountFlags)
		want string
	}{
		{"no args", func(f *mountFlags) { f.Args = nil }, "expected SOURCE and MOUNTPOINT, got 0"},
		{"one arg", func(f *mountFlags) { f.Args = []string{"/data"} }, "got 1"},
		{"three args", func(f *mountFlags) { f.Args = []string{"/a", "/b", "/c"} }, "got 3"},
		{"empty source", func(f *mountFlags) { f.Args = []string{"", "/mnt"} }, "empty source"},
		{"empty mountpoint", func(f *mountFlags) { f.Args = []string{"/data", ""} }, "empty mountpoint"},
		{"unknown scheme", func(f *mountFlags) { f.Args = []string{"gs://bucket/x", "/mnt"} }, `unknown source scheme "gs"`},
		{"file url with host", func(f *mountFlags) { f.Args = []string{"file://host/data", "/mnt"} }, `not host "host"`},
		{"file url without path", func(f *mountFlags) { f.Args = []string{"file://", "/mnt"} }, "needs an absolute path"},
		{"bad url", func(f *mountFlags) { f.Args = []string{"file://%zz/x", "/mnt"} }, "not a valid URL"},
		{"malformed chunk size", func(f *mountFlags) { f.ChunkSize = "4XB" }, `--chunk-size: malformed size "4XB"`},
		{"empty chunk size", func(f *mountFlags) { f.ChunkSize = "" }, "--chunk-size: a size is required"},
		{"tiny chunk size", func(f *mountFlags) { f.ChunkSize = "100" }, "--chunk-size: size \"100\" out of range"},
		{"huge chunk size", func(f *mountFlags) { f.ChunkSize = "2GiB" }, "--chunk-size: size \"2GiB\" out of range"},
		{"negative read-ahead", func(f *mountFlags) { f.ReadAhead = "-1" }, `--read-ahead: malformed size "-1"`},
		{"huge read-ahead", func(f *mountFlags) { f.ReadAhead = "5GiB" }, "--read-ahead: size \"5GiB\" out of range"},
		{"overflowing size", func(f *mountFlags) { f.ReadAhead = "100EiB" }, "--read-ahead: malformed size"},
		{"malformed duration", func(f *mountFlags) { f.AttrTimeout = "5y" }, `--attr-timeout: malformed duration "5y"`},
		{"unitless duration", func(f *mountFlags) { f.AttrTimeout = "10" }, `--attr-timeout: malformed duration "10"`},
		{"negative duration", func(f *mountFlags) { f.AttrTimeout = "-1s" }, `--attr-timeout: negative duration "-1s"`},
		{"bad log level", func(f *mountFlags) { f.LogLevel = "loud" }, `--log-level: unknown level "loud"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := base
			tt.edit(&f)
			_, err := f.config([]string{"file"})
			if err == nil {
				t.Fatalf("config(%+v) = nil error, want %q", f, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
			if got := exitCode(err); got != exitUsage {
				t.Errorf("exit code %d, want %d", got, exitUsage)
			}
		})
	}
}

func TestParseSource(t *testing.T) {
	known := []string{"az", "file", "s3"}
	tests := []struct {
		in, scheme, host, path string
	}{
		{"/data/imagenet", "file", "", "/data/imagenet"},
		{"/data/../data/x/", "file", "", "/data/x"},
		{"file:///data/imagenet", "file", "", "/data/imagenet"},
		{"FILE:///data", "file", "", "/data"},
		{"file://localhost/data", "file", "", "/data"},
		{"s3://bucket/prefix", "s3", "bucket", "/prefix"},
		{"az://account/container", "az", "account", "/container"},
		{"/odd:name", "file", "", "/odd:name"},
	}
	for _, tt := range tests {
		u, err := parseSource(tt.in, known)
		if err != nil {
			t.Errorf("parseSource(%q): %v", tt.in, err)
			continue
		}
		if u.Scheme != tt.scheme || u.Host != tt.host || u.Path != tt.path {
			t.Errorf("parseSource(%q) = scheme %q host %q path %q, want %q %q %q", tt.in, u.Scheme, u.Host, u.Path, tt.scheme, tt.host, tt.path)
		}
	}
}

func TestSourceOpenersTable(t *testing.T) {
	openers := sourceOpeners()
	if _, ok := openers["file"]; !ok {
		t.Fatal(`sourceOpeners has no "file" entry`)
	}
	for scheme, o := range openers {
		if o.open == nil {
			t.Errorf("scheme %q has no open function", scheme)
		}
		for _, f := range o.flags {
			if ef, ok := f.(interface{ GetEnvVars() []string }); !ok || len(ef.GetEnvVars()) == 0 || !strings.HasPrefix(ef.GetEnvVars()[0], "STALLFS_") {
				t.Errorf("scheme %q flag %v has no STALLFS_ environment variable", scheme, f.Names())
			}
		}
	}
	if got := sourceSchemes(openers); !slices.IsSorted(got) || len(got) != len(openers) {
		t.Errorf("sourceSchemes = %v, want all schemes sorted", got)
	}
}

func TestCheckSourceDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkSourceDir(dir); err != nil {
		t.Errorf("checkSourceDir(dir) = %v, want nil", err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "missing"): "does not exist",
		file:                          "is not a directory",
		filepath.Join(file, "below"):  "not a directory",
	} {
		err := checkSourceDir(path)
		if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != exitUsage {
			t.Errorf("checkSourceDir(%q) = %v (exit %d), want usage error containing %q", path, err, exitCode(err), want)
		}
	}
}

// Every flag of every command can be set from an STALLFS_ variable.
func TestEveryFlagHasEnvVar(t *testing.T) {
	a := &cliApp{getenv: os.Getenv}
	for _, c := range a.newApp().Commands {
		for _, f := range c.Flags {
			ef, ok := f.(interface{ GetEnvVars() []string })
			if !ok || len(ef.GetEnvVars()) == 0 || !strings.HasPrefix(ef.GetEnvVars()[0], "STALLFS_") {
				t.Errorf("%s --%s has no STALLFS_ environment variable", c.Name, f.Names()[0])
			}
		}
	}
}

func TestReorderArgs(t *testing.T) {
	app := (&cliApp{getenv: os.Getenv}).newApp()
	app.Commands = append(app.Commands, &cli.Command{
		Name:  "sub",
		Flags: []cli.Flag{&cli.BoolFlag{Name: "b"}},
		Subcommands: []*cli.Command{{
			Name:  "leaf",
			Flags: []cli.Flag{&cli.IntFlag{Name: "n"}, &cli.BoolFlag{Name: "b"}},
		}},
	})
	tests := []struct {
		in, want string
	}{
		{"stallfs mount SRC MNT --daemon", "stallfs mount --daemon -- SRC MNT"},
		{"stallfs mount SRC --chunk-size 1MiB MNT", "stallfs mount --chunk-size 1MiB -- SRC MNT"},
		{"stallfs mount --read-ahead=1M SRC MNT --force", "stallfs mount --read-ahead=1M --force -- SRC MNT"},
		{"stallfs mount SRC MNT --bogus x", "stallfs mount --bogus -- SRC MNT x"},
		{"stallfs mount -- -odd MNT", "stallfs mount -- -odd MNT"},
		{"stallfs unmount MNT --lazy", "stallfs unmount --lazy -- MNT"},
		{"stallfs umount MNT -z", "stallfs umount -z -- MNT"},
		{"stallfs version", "stallfs version"},
		{"stallfs sub leaf MNT --n 2 --b", "stallfs sub leaf --n 2 --b -- MNT"},
		{"stallfs sub MNT --b", "stallfs sub --b -- MNT"},
		{"stallfs sub nosuch MNT", "stallfs sub -- nosuch MNT"},
		{"stallfs nosuch a --b", "stallfs nosuch a --b"},
		{"stallfs", "stallfs"},
		{"stallfs --help", "stallfs --help"},
	}
	for _, tt := range tests {
		got := strings.Join(reorderArgs(app, strings.Fields(tt.in)), " ")
		if got != tt.want {
			t.Errorf("reorderArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseMountinfoLine(t *testing.T) {
	line := `412 29 0:52 / /tmp/a\040b\134c rw,nosuid,nodev,relatime shared:220 - fuse.stallfs file:///data\040x rw,user_id=0,group_id=0`
	e, ok := parseMountinfoLine(line)
	if !ok {
		t.Fatalf("parseMountinfoLine(%q) failed", line)
	}
	want := mountEntry{Mountpoint: `/tmp/a b\c`, FSType: "fuse.stallfs", Source: "file:///data x"}
	if e != want {
		t.Errorf("got %+v, want %+v", e, want)
	}
	// Optional fields are variable in number.
	e, ok = parseMountinfoLine("22 1 8:1 / / rw - ext4 /dev/sda1 rw")
	if !ok || e.Mountpoint != "/" || e.FSType != "ext4" {
		t.Errorf("no optional fields: got %+v %v", e, ok)
	}
	if _, ok := parseMountinfoLine("garbage"); ok {
		t.Error("parseMountinfoLine(garbage) succeeded")
	}
}

func TestInspectMountpoint(t *testing.T) {
	dir := t.TempDir()
	if st, err := inspectMountpoint(dir); err != nil || st != mountFree {
		t.Errorf("inspectMountpoint(empty dir) = %v, %v; want free", st, err)
	}
	if st, err := inspectMountpoint("/proc"); err != nil || st != mountMounted {
		t.Errorf("inspectMountpoint(/proc) = %v, %v; want mounted", st, err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{filepath.Join(dir, "nope"): "does not exist", file: "is not a directory"} {
		_, err := inspectMountpoint(path)
		if err == nil || !strings.Contains(err.Error(), want) || exitCode(err) != exitUsage {
			t.Errorf("inspectMountpoint(%q) = %v, want usage error containing %q", path, err, want)
		}
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), 1},
		{usagef("bad"), 2},
		{&statusError{code: 7, err: errors.New("x")}, 7},
		{cli.Exit("x", 3), 3},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestReadyPipeProtocol(t *testing.T) {
	for _, tt := range []struct {
		name string
		send func(*readyPipe)
		want string
	}{
		{"ok", func(r *readyPipe) { r.ok(); r.fail(errors.New("late")) }, "ok\n"},
		{"usage", func(r *readyPipe) { r.fail(usagef("source %q\ndoes not exist", "/x")) }, "err 2 source \"/x\" does not exist\n"},
		{"runtime", func(r *readyPipe) { r.fail(errors.New("mount failed")) }, "err 1 mount failed\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			tt.send(&readyPipe{f: w})
			b, err := io.ReadAll(r)
			if got := string(b); err != nil || got != tt.want {
				t.Errorf("pipe got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestBuildVersion(t *testing.T) {
	if v := buildVersion(); v == "" {
		t.Error("buildVersion() is empty")
	}
}

func TestImpliedSource(t *testing.T) {
	openers := map[string]sourceOpener{
		"file": {open: openFileSource},
		"az": {implied: func(*cli.Context) (string, bool, error) {
			return "az://account/container", true, nil
		}},
	}
	got, err := impliedSource(nil, openers, []string{"/mnt"})
	if err != nil || !slices.Equal(got, []string{"az://account/container", "/mnt"}) {
		t.Errorf("impliedSource(one arg) = %v, %v; want the implied source first", got, err)
	}
	got, err = impliedSource(nil, openers, []string{"/src", "/mnt"})
	if err != nil || !slices.Equal(got, []string{"/src", "/mnt"}) {
		t.Errorf("impliedSource(two args) = %v, %v; want them unchanged", got, err)
	}
	got, err = impliedSource(nil, map[string]sourceOpener{"file": {open: openFileSource}}, []string{"/mnt"})
	if err != nil || len(got) != 1 {
		t.Errorf("impliedSource without hooks = %v, %v; want the lone argument", got, err)
	}
}
