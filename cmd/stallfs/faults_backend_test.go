package main

// Backend faults through a real daemon mount of a local source, injected
// below the read path by the throttle wrapper (faultflags.go): a burst of
// errors that retries absorb, a persistent error (EIO, the cause logged
// once per item, never a short read), and a backend that never answers
// (EIO within the request timeout's bound), each followed by recovery.

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// faultFile is the fault spec file of a mount (STALLFS_X_BACKEND_FAULT_FILE).
type faultFile string

// newFaultFile sets the environment of the mounts started from now on in
// this test to read their faults from a fresh file (none yet: no fault).
func newFaultFile(t *testing.T) faultFile {
	t.Helper()
	f := faultFile(filepath.Join(t.TempDir(), "fault"))
	t.Setenv(envBackendFaultFile, string(f))
	return f
}

// set replaces the spec atomically (a new inode: the daemon sees the change
// at its next backend request).
func (f faultFile) set(t *testing.T, spec string) {
	t.Helper()
	tmp := string(f) + ".tmp"
	if err := os.WriteFile(tmp, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, string(f)); err != nil {
		t.Fatal(err)
	}
}

// daemonLog returns the log of the daemon with pid (mountDaemon's --log-file).
func daemonLog(t *testing.T, pid int) string {
	t.Helper()
	// The daemon's log is the only file in its log directory that the
	// daemon has open; find it by /proc rather than keeping the path.
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		p, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + fd.Name())
		if err == nil && strings.HasSuffix(p, "/stallfs.log") {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	t.Fatalf("no stallfs.log open in daemon %d", pid)
	return ""
}

// readFile reads one file of d through mnt: nil and every byte checked, or
// the read's error (a short or wrong read fails the test).
func (d *fltData) readFile(t *testing.T, mnt, p string) error {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
	if err != nil {
		return err
	}
	if len(got) != d.sizes[p] || !bytes.Equal(got, pattern(p, len(got))) {
		t.Fatalf("%s: %d bytes read differ from the source (%d bytes)", p, len(got), d.sizes[p])
	}
	return nil
}

// A burst of errors no longer than the retries: every read gets its bytes.
// Then a persistent error on one directory: its files fail with EIO (the
// cause logged once per item however often it is read), the others read
// right; the error cleared, the same files read right.
func TestFaultBackendErrorsThenRecovery(t *testing.T) {
	d := newFltData(t, 36, 5000)
	ff := newFaultFile(t)
	ff.set(t, "error count=3") // the mount's default: 3 retries per item
	mnt := testMountpoint(t)
	m := fltMountDaemon(t, d.src, mnt, "--cache-mem", "16MiB")
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("a burst of 3 errors was not absorbed by the retries: %v", err)
	}
	st := m.stats(t)
	t.Logf("burst: %d backend requests, %d errors, %d retries", st.Backend.Requests, st.Backend.Errors, st.Backend.Retries)
	if st.Backend.Errors != 3 || st.Backend.Retries < 3 {
		t.Errorf("burst: %d backend errors and %d retries counted, want 3 and >= 3", st.Backend.Errors, st.Backend.Retries)
	}

	// Persistent: every read below train/c1/ fails. A fresh mount, so
	// that nothing is cached.
	if code, _, stderr := stallfsCmd(t, "unmount", mnt); code != 0 {
		t.Fatalf("unmount: %s", stderr)
	}
	ff.set(t, "error path=train/c1/")
	m = fltMountDaemon(t, d.src, mnt, "--cache-mem", "16MiB")
	var failed []string
	for round := range 2 {
		for _, p := range d.files {
			start := time.Now()
			err := d.readFile(t, mnt, p)
			bad := strings.HasPrefix(p, "train/c1/")
			switch {
			case bad && !errors.Is(err, syscall.EIO):
				t.Errorf("round %d: %s under a persistent error: %v, want EIO", round, p, err)
			case !bad && err != nil:
				t.Errorf("round %d: %s (no fault): %v", round, p, err)
			case bad && round == 0:
				failed = append(failed, p)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("%s took %v", p, took)
			}
		}
	}
	var failLines []string
	for line := range strings.Lines(daemonLog(t, m.pid)) {
		if strings.Contains(line, "backend read failed") {
			failLines = append(failLines, line)
		}
	}
	log := strings.Join(failLines, "")
	for _, p := range failed {
		if n := strings.Count(log, "path="+p+" "); n != 1 {
			t.Errorf("%s failed in 2 rounds; its cause is logged %d times, want once", p, n)
		}
	}
	if !strings.Contains(log, "injected fault") {
		t.Errorf("the log does not name the cause:\n%s", log)
	}
	t.Logf("persistent: %d files failed with EIO in both rounds, each logged once", len(failed))

	// Cleared: the same files read right from the same mount.
	ff.set(t, "pass")
	for _, p := range failed {
		if err := d.readFile(t, mnt, p); err != nil {
			t.Errorf("%s after the error cleared: %v", p, err)
		}
	}
}

// A backend that never answers: with a 300 ms request timeout, a read
// fails with EIO after the first try and 3 retries (about 1.3 s), never
// hangs; once the backend answers again, the same files read right.
func TestFaultBackendTimeoutThenRecovery(t *testing.T) {
	const timeout = 300 * time.Millisecond
	d := newFltData(t, 6, 5000)
	ff := newFaultFile(t)
	t.Setenv(envBackendTimeout, timeout.String())
	ff.set(t, "hang")
	mnt := testMountpoint(t)
	fltMountDaemon(t, d.src, mnt, "--cache-mem", "16MiB")
	// Retries 3 with a backoff of 10, 20, 40 ms: 4 x timeout + 70 ms.
	bound := 4*timeout + 70*time.Millisecond
	for _, p := range d.files[:3] {
		start := time.Now()
		err := d.readFile(t, mnt, p)
		took := time.Since(start)
		t.Logf("%s with the backend hung: %v after %v", p, err, took.Round(time.Millisecond))
		if !errors.Is(err, syscall.EIO) {
			t.Errorf("%s: %v, want EIO", p, err)
		}
		if took < 4*timeout || took > bound+2*time.Second {
			t.Errorf("%s failed after %v, want about %v (4 tries of %v)", p, took, bound, timeout)
		}
	}
	ff.set(t, "pass")
	if err := d.readAll(t, mnt); err != nil {
		t.Errorf("after the backend recovered: %v", err)
	}
}
