package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunBadInput runs the whole command line in-process: every bad input
// exits with status 2, prints exactly one line on stderr naming the
// problem, and mounts nothing.
func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	mnt := filepath.Join(dir, "mnt")
	file := filepath.Join(dir, "file")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no command", nil, nil, "stallfs: missing command"},
		{"unknown command", []string{"frobnicate"}, nil, `stallfs: unknown command "frobnicate"`},
		{"unknown global flag", []string{"--bogus"}, nil, "stallfs: unknown flag --bogus"},
		{"mount no args", []string{"mount"}, nil, "stallfs: mount: expected SOURCE and MOUNTPOINT, got 0 argument(s)"},
		{"mount one arg", []string{"mount", src}, nil, "got 1 argument(s)"},
		{"mount three args", []string{"mount", src, mnt, mnt}, nil, "got 3 argument(s)"},
		{"missing source", []string{"mount", "/nonexistent-stallfs-src", mnt}, nil, `stallfs: mount: source "/nonexistent-stallfs-src" does not exist`},
		{"missing source file url", []string{"mount", "file:///nonexistent-stallfs-src", mnt}, nil, `source "/nonexistent-stallfs-src" does not exist`},
		{"source not a directory", []string{"mount", file, mnt}, nil, `source "` + file + `" is not a directory`},
		{"mountpoint missing", []string{"mount", src, filepath.Join(dir, "nope")}, nil, `mountpoint "` + filepath.Join(dir, "nope") + `" does not exist`},
		{"mountpoint not a directory", []string{"mount", src, file}, nil, `mountpoint "` + file + `" is not a directory`},
		{"mountpoint already a mount", []string{"mount", src, "/proc"}, nil, `mountpoint "/proc" is already a mount`},
		{"force does not replace a live mount", []string{"mount", "--force", src, "/proc"}, nil, `mountpoint "/proc" is already a mount`},
		{"unknown scheme", []string{"mount", "gs://bucket/x", mnt}, nil, `unknown source scheme "gs"`},
		{"malformed size", []string{"mount", src, mnt, "--chunk-size", "4XB"}, nil, `--chunk-size: malformed size "4XB"`},
		{"malformed read-ahead", []string{"mount", "--read-ahead=lots", src, mnt}, nil, `--read-ahead: malformed size "lots"`},
		{"malformed duration", []string{"mount", src, mnt, "--attr-timeout=5y"}, nil, `--attr-timeout: malformed duration "5y"`},
		{"malformed size from env", []string{"mount", src, mnt}, map[string]string{"STALLFS_CHUNK_SIZE": "big"}, `--chunk-size: malformed size "big"`},
		{"malformed bool from env", []string{"mount", src, mnt}, map[string]string{"STALLFS_DAEMON": "maybe"}, `environment variable "STALLFS_DAEMON"`},
		{"bad log level", []string{"mount", src, mnt, "--log-level", "loud"}, nil, `unknown level "loud"`},
		{"log file in missing dir", []string{"mount", src, mnt, "--log-file", filepath.Join(dir, "no", "log")}, nil, `--log-file "` + filepath.Join(dir, "no", "log") + `"`},
		{"unknown mount flag", []string{"mount", src, mnt, "--bogus"}, nil, "stallfs: mount: unknown flag --bogus"},
		{"unknown short flag", []string{"mount", "-q", src, mnt}, nil, "stallfs: mount: unknown flag -q"},
		{"daemon bad input checked before fork", []string{"mount", "--daemon", src, file}, nil, `mountpoint "` + file + `" is not a directory`},
		{"unmount no args", []string{"unmount"}, nil, "stallfs: unmount: expected MOUNTPOINT, got 0 argument(s)"},
		{"unmount two args", []string{"unmount", mnt, mnt}, nil, "got 2 argument(s)"},
		{"unmount missing", []string{"unmount", filepath.Join(dir, "nope")}, nil, "does not exist"},
		{"unmount not mounted", []string{"unmount", mnt}, nil, `"` + mnt + `" is not a mount`},
		{"unmount not fuse", []string{"unmount", "/proc"}, nil, `"/proc" is a proc mount, not a stallfs mount`},
		{"unmount unknown flag", []string{"unmount", "--now", mnt}, nil, "stallfs: unmount: unknown flag --now"},
		{"help unknown command", []string{"help", "nosuch"}, nil, `stallfs: help: unknown command "nosuch"`},
		{"version args", []string{"version", "x"}, nil, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"stallfs"}, tt.args...), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit status %d, want %d (stderr %q)", code, exitUsage, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "stallfs: ") {
				t.Errorf("stderr = %q, want one line starting with %q", stderr.String(), "stallfs: ")
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.want)
			}
			if e, err := findMount(mnt); err != nil || e != nil {
				t.Errorf("after bad input, %s is mounted (%+v, %v)", mnt, e, err)
			}
		})
	}
}

func TestRunVersionAndHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"stallfs", "version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("version: exit %d, stderr %q", code, stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "stallfs ") || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("version printed %q, want one line starting with \"stallfs \"", stdout.String())
	}
	stdout.Reset()
	if code := run(t.Context(), []string{"stallfs", "mount", "--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("mount --help: exit %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{"--daemon", "--chunk-size", "STALLFS_READ_AHEAD", "--force"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("mount --help does not mention %s", want)
		}
	}
}
