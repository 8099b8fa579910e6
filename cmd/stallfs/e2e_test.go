package main

// End-to-end tests of the stallfs binary: build it, mount for real into
// t.TempDir(), read through the mount, kill it, recover. They need the fs
// package and /dev/fuse (these tests run as root).

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var testBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if testBinary.dir != "" {
		os.RemoveAll(testBinary.dir)
	}
	os.Exit(code)
}

// stallfsBinary builds the stallfs command once per test process.
func stallfsBinary(t *testing.T) string {
	t.Helper()
	testBinary.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		testBinary.dir, testBinary.err = os.MkdirTemp("", "stallfs-bin-")
		if testBinary.err != nil {
			return
		}
		testBinary.path = filepath.Join(testBinary.dir, "stallfs")
		out, err := exec.Command(goBin, "build", "-o", testBinary.path, ".").CombinedOutput()
		if err != nil {
			testBinary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if testBinary.err != nil {
		t.Fatal(testBinary.err)
	}
	return testBinary.path
}

// pattern is the content of test file name at offset off.
func pattern(name string, size int) []byte {
	h := fnv.New32a()
	h.Write([]byte(name))
	seed := h.Sum32()
	p := make([]byte, size)
	for i := range p {
		x := uint32(i)*2654435761 ^ seed
		p[i] = byte(x>>24) ^ byte(i>>13)
	}
	return p
}

// makeDataset writes a small tree with a deterministic pattern and returns
// the relative paths of its files.
func makeDataset(t *testing.T, root string) []string {
	t.Helper()
	files := map[string]int{
		"empty":                                 0,
		"one":                                   1,
		"train/n01/a.JPEG":                      110_000,
		"train/n01/b c.JPEG":                    4097,
		"train/n02/é ü.JPEG":                    65536,
		"train/n02/deep/er/x.bin":               333,
		"shards/shard-000000.tar":               5<<20 + 123, // larger than a chunk
		"train/n03/" + strings.Repeat("l", 200): 12,
	}
	for i := range 40 {
		files[fmt.Sprintf("train/n04/%05d.JPEG", i)] = 1000 + 997*i
	}
	var paths []string
	for p, size := range files {
		writeTestFile(t, root, p, pattern(p, size))
		paths = append(paths, p)
	}
	return paths
}

// stallfsCmd runs the binary to completion and returns its status and
// output streams.
func stallfsCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(stallfsBinary(t), args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run stallfs %v: %v", args, err)
	}
	return code, o.String(), e.String()
}

// newMountDirs returns a dataset, an empty mountpoint and a cleanup that
// detaches whatever is left mounted there.
func newMountDirs(t *testing.T) (src, mnt string, files []string) {
	t.Helper()
	dir := t.TempDir()
	src, mnt = filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	files = makeDataset(t, src)
	t.Cleanup(func() {
		for range 5 {
			if e, _ := findMount(mnt); e == nil {
				return
			}
			_ = unmountPath(mnt, true)
		}
	})
	return src, mnt, files
}

func isMounted(mnt string) bool {
	e, err := findMount(mnt)
	return err == nil && e != nil
}

// checkFiles reads every file through the mount and compares its bytes.
func checkFiles(t *testing.T, mnt string, files []string) {
	t.Helper()
	for _, p := range files {
		got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("read %s through the mount: %v", p, err)
			continue
		}
		want := pattern(p, len(got))
		if len(got) != len(want) || !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes that differ from the source", p, len(got))
		}
	}
	st, err := os.Stat(filepath.Join(mnt, "shards/shard-000000.tar"))
	if err != nil || st.Size() != 5<<20+123 {
		t.Errorf("stat shard through the mount: %v, %v", st, err)
	}
}

func TestE2EDaemonMountReadUnmount(t *testing.T) {
	src, mnt, files := newMountDirs(t)
	logFile := filepath.Join(t.TempDir(), "stallfs.log")
	code, stdout, stderr := stallfsCmd(t, "mount", "--daemon", "--log-file", logFile, src, mnt)
	if code != 0 {
		t.Fatalf("mount --daemon: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	// --daemon returns only once the mount is ready: no polling here.
	if !isMounted(mnt) {
		t.Fatalf("mount --daemon returned 0 but %s is not mounted", mnt)
	}
	pid := daemonPID(t, logFile)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	if got := mountPID(t.Context(), mnt); got != pid {
		t.Errorf("control socket reports pid %d, the log says %d", got, pid)
	}
	checkFiles(t, mnt, files)
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got, want := strings.Join(names, ","), "empty,one,shards,train"; got != want {
		t.Errorf("mount root lists %q, want %q", got, want)
	}
	if err := os.WriteFile(filepath.Join(mnt, "new"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("create through the mount: %v, want EROFS", err)
	}

	code, stdout, stderr = stallfsCmd(t, "unmount", mnt)
	if code != 0 {
		t.Fatalf("unmount: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if isMounted(mnt) {
		t.Fatalf("%s still mounted after stallfs unmount", mnt)
	}
	if entries, err := os.ReadDir(mnt); err != nil || len(entries) != 0 {
		t.Errorf("mountpoint after unmount: %d entries, %v; want the empty directory", len(entries), err)
	}
	// stallfs unmount returns only once the daemon has exited.
	if !processGone(pid) {
		t.Errorf("daemon %d still running after stallfs unmount returned", pid)
	}
}

// daemonPID reads the daemon's pid from its "mounted" log line.
func daemonPID(t *testing.T, logFile string) int {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(b)) {
		if v, ok := strings.CutPrefix(f, "pid="); ok {
			if pid, err := strconv.Atoi(v); err == nil {
				return pid
			}
		}
	}
	t.Fatalf("no pid= in the daemon log:\n%s", b)
	return 0
}

// A failure in the daemon child is relayed by the parent: same message,
// same status.
func TestE2EDaemonRelaysChildError(t *testing.T) {
	_, mnt, _ := newMountDirs(t)
	code, _, stderr := stallfsCmd(t, "mount", "--daemon", "/nonexistent-stallfs-src", mnt)
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `source "/nonexistent-stallfs-src" does not exist`) {
		t.Errorf("exit %d, stderr %q; want 2 and one line naming the source", code, stderr)
	}
	if isMounted(mnt) {
		t.Error("mounted despite the error")
	}
}

func TestE2EBinaryBadInput(t *testing.T) {
	src, mnt, _ := newMountDirs(t)
	for _, args := range [][]string{
		{"mount", src, mnt, "--no-such-flag"},
		{"mount", src},
		{"mount", src, filepath.Join(mnt, "missing")},
		{"mount", "gs://x", mnt},
		{"mount", src, mnt, "--chunk-size", "4XB"},
		{"unmount", mnt},
	} {
		code, _, stderr := stallfsCmd(t, args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "stallfs: ") {
			t.Errorf("stallfs %v: exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
}

func TestE2ESignalUnmountsCleanly(t *testing.T) {
	for _, tt := range []struct {
		sig      syscall.Signal
		openFile bool // an open file must not block the clean unmount
	}{
		{syscall.SIGTERM, true},
		{syscall.SIGINT, false},
		{syscall.SIGHUP, false},
	} {
		t.Run(fmt.Sprintf("%s open=%t", tt.sig, tt.openFile), func(t *testing.T) {
			src, mnt, files := newMountDirs(t)
			p := startForeground(t, src, mnt)
			checkFiles(t, mnt, files[:3])
			if tt.openFile {
				f, err := os.Open(filepath.Join(mnt, "one"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
			}
			if err := p.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			if err := p.waitExit(t, 30*time.Second); err != nil {
				t.Fatalf("after %v: %v, want exit status 0\n%s", tt.sig, err, p.stderr.String())
			}
			if isMounted(mnt) {
				t.Errorf("%s still mounted after %v", mnt, tt.sig)
			}
			if !strings.Contains(p.stderr.String(), "signal received; unmounting") {
				t.Errorf("log does not show the signal being handled:\n%s", p.stderr.String())
			}
		})
	}
}

// killMount starts a foreground mount and SIGKILLs it, leaving a stale
// mountpoint.
func killMount(t *testing.T, src, mnt string) {
	t.Helper()
	p := startForeground(t, src, mnt)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.waitExit(t, 30*time.Second)
	if _, err := os.Stat(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the mountpoint after SIGKILL: %v, want ENOTCONN (a stale mount)", err)
	}
}

func TestE2EStaleMountRecovery(t *testing.T) {
	src, mnt, files := newMountDirs(t)

	killMount(t, src, mnt)
	code, _, stderr := stallfsCmd(t, "mount", src, mnt)
	if code != exitUsage || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "stale mount") || !strings.Contains(stderr, "stallfs unmount "+mnt) || !strings.Contains(stderr, "--force") {
		t.Fatalf("mount over a stale mountpoint: exit %d, stderr %q; want 2 and the explanation", code, stderr)
	}
	if code, _, stderr := stallfsCmd(t, "mount", "--daemon", src, mnt); code != exitUsage || !strings.Contains(stderr, "stale mount") {
		t.Fatalf("mount --daemon over a stale mountpoint: exit %d, stderr %q; want 2", code, stderr)
	}

	t.Run("mount --force", func(t *testing.T) {
		logFile := filepath.Join(t.TempDir(), "log")
		code, _, stderr := stallfsCmd(t, "mount", "--force", "--daemon", "--log-file", logFile, src, mnt)
		if code != 0 {
			t.Fatalf("mount --force: exit %d, stderr %q", code, stderr)
		}
		pid := daemonPID(t, logFile)
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		checkFiles(t, mnt, files)
		if code, _, stderr := stallfsCmd(t, "unmount", mnt); code != 0 {
			t.Fatalf("unmount: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("stallfs unmount", func(t *testing.T) {
		killMount(t, src, mnt)
		if code, _, stderr := stallfsCmd(t, "unmount", mnt); code != 0 {
			t.Fatalf("unmount of a stale mountpoint: exit %d, stderr %q", code, stderr)
		}
		if _, err := os.Stat(mnt); err != nil || isMounted(mnt) {
			t.Fatalf("after unmount: stat %v, mounted %v; want a plain directory", err, isMounted(mnt))
		}
	})
}

// A foreground mount unmounted from outside exits 0, and `stallfs unmount`
// returns only after it exited.
func TestE2EExternalUnmountExitsZero(t *testing.T) {
	src, mnt, _ := newMountDirs(t)
	p := startForeground(t, src, mnt)
	if code, _, stderr := stallfsCmd(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: exit %d, stderr %q", code, stderr)
	}
	if !processGone(p.cmd.Process.Pid) {
		t.Error("stallfs unmount returned before the mount's process exited")
	}
	if err := p.waitExit(t, 10*time.Second); err != nil {
		t.Errorf("foreground mount after an external unmount: %v, want exit status 0\n%s", err, p.stderr.String())
	}
}
