package main

// Helpers shared by the end-to-end tests of this package: foreground and
// daemon mounts of the stallfs binary, mountpoints detached at cleanup,
// filling an object store with the e2e dataset, walking and reading a
// mount, and a process's rchar.

import (
	"bytes"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// mountProc is a foreground `stallfs mount` process.
type mountProc struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
	done   chan struct{} // closed once the process exited; then err is set
	err    error
}

// waitExit waits up to d for the process to exit and returns its result.
func (p *mountProc) waitExit(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		t.Fatalf("stallfs mount still running after %v\n%s", d, p.stderr.String())
		return nil
	}
}

// startForeground starts `stallfs mount SRC MNT` in the foreground and
// waits until the mount is served.
func startForeground(t *testing.T, src, mnt string, extra ...string) *mountProc {
	t.Helper()
	return startForegroundArgs(t, mnt, append([]string{"mount", src, mnt}, extra...)...)
}

// startForegroundArgs is startForeground with the whole argument list: it
// runs `stallfs ARGS...`, kills it at cleanup, and waits until mnt is
// mounted (the test fails if the process exits first or 30 s pass).
func startForegroundArgs(t *testing.T, mnt string, args ...string) *mountProc {
	t.Helper()
	p := &mountProc{done: make(chan struct{})}
	p.cmd = exec.Command(stallfsBinary(t), args...)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	// Wait for the "mounted" log line, not only for the mount table: the
	// daemon's own start-up lookup in the mount (go-fuse's poll hack) runs
	// after the kernel lists the mount, and a SIGKILL during it leaves a
	// connection that nobody can answer.
	for !isMounted(mnt) || !strings.Contains(p.stderr.String(), "msg=mounted") {
		select {
		case <-p.done:
			t.Fatalf("stallfs mount exited before mounting: %v\n%s", p.err, p.stderr.String())
		case <-deadline:
			t.Fatalf("stallfs mount did not mount within 30s\n%s", p.stderr.String())
		case <-tick.C:
		}
	}
	return p
}

// lockedBuffer is a bytes.Buffer that a process writes while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mountDaemon runs `stallfs mount --daemon --log-file LOG FLAGS... SRC MNT`,
// fails the test unless it exits 0, and returns the daemon's pid (from its
// log). Unmounting is the caller's.
func mountDaemon(t *testing.T, src, mnt string, flags ...string) int {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "stallfs.log")
	args := append([]string{"mount", "--daemon", "--log-file", logFile}, flags...)
	code, stdout, stderr := stallfsCmd(t, append(args, src, mnt)...)
	if code != 0 {
		t.Fatalf("stallfs %v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
	}
	return daemonPID(t, logFile)
}

// testMountpoint returns an empty directory and detaches whatever is left
// mounted on it when the test ends (after the mount process is killed:
// register it before starting the mount).
func testMountpoint(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 5 {
			if e, _ := findMount(mnt); e == nil {
				return
			}
			_ = unmountPath(mnt, true)
		}
	})
	return mnt
}

// writeTestFile writes data to root/rel (rel with slashes), making the
// directories on the way.
func writeTestFile(t *testing.T, root, rel string, data []byte) {
	t.Helper()
	full := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// uploadDataset generates the e2e dataset (makeDataset), hands every file
// to put (an object store's upload) and returns the relative file paths.
func uploadDataset(t *testing.T, put func(name string, data []byte)) []string {
	t.Helper()
	src := t.TempDir()
	files := makeDataset(t, src)
	for _, p := range files {
		data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		put(p, data)
	}
	return files
}

// fileTree lists the regular files below root, relative with slashes and
// sorted; with dirs, the directories too, with a trailing slash.
func fileTree(t *testing.T, root string, dirs bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir() && dirs:
			out = append(out, filepath.ToSlash(rel)+"/")
		case d.Type().IsRegular():
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	slices.Sort(out)
	return out
}

// readConcurrently reads every file of files (pattern content) through mnt
// with 16 concurrent readers, reader r starting at file r*stride, and
// compares every byte.
func readConcurrently(t *testing.T, mnt string, files []string, stride int) {
	t.Helper()
	var wg sync.WaitGroup
	for r := range 16 {
		wg.Go(func() {
			for i := range files {
				p := files[(i+r*stride)%len(files)]
				got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
				if err != nil {
					t.Errorf("reader %d: %s: %v", r, p, err)
					continue
				}
				if !bytes.Equal(got, pattern(p, len(got))) {
					t.Errorf("reader %d: %s: %d bytes differ from the source", r, p, len(got))
				}
			}
		})
	}
	wg.Wait()
}

// procRchar is rchar of /proc/PID/io: every byte process pid's read calls
// returned (backend files, /dev/fuse requests, the control socket).
func procRchar(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no rchar in /proc/%d/io:\n%s", pid, b)
	return 0
}
