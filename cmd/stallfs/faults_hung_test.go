package main

// A daemon that holds its FUSE connection but never answers (SIGSTOPped;
// the same state a SIGKILL during go-fuse's start-up can leave): a process
// reading the mount blocks; `stallfs mount` refuses the mountpoint within
// seconds instead of hanging; `stallfs unmount --force` aborts the
// connection (the blocked reader gets an error) and detaches it, and
// `stallfs mount --force` recovers it; the mountpoint then serves a new
// mount, every byte right.

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

	"github.com/stallfs/stallfs/fs"
)

// stopDaemon SIGSTOPs pid and makes sure it is killed at the end of the
// test (SIGKILL ends a stopped process too).
func stopDaemon(t *testing.T, pid int) {
	t.Helper()
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// SIGSTOP stops the threads one by one; a thread not yet stopped could
	// still take a request from /dev/fuse. Wait until every one is.
	deadline := time.Now().Add(10 * time.Second)
	for !allStopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %d not stopped 10s after SIGSTOP", pid)
		}
		<-time.After(10 * time.Millisecond) // poll interval, not a synchronisation
	}
}

// allStopped reports whether every thread of pid is stopped (state T).
func allStopped(pid int) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces, the state follows
		// the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// blockedRead starts a read of p through mnt that blocks on the hung
// daemon; the channel gets its result.
func blockedRead(mnt, p string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
		ch <- err
	}()
	return ch
}

// stallfsWithin runs `stallfs ARGS...` and fails the test unless it ends
// within d.
func stallfsWithin(t *testing.T, d time.Duration, args ...string) (code int, stderr string, took time.Duration) {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		code, _, stderr = stallfsCmd(t, args...)
	}()
	select {
	case <-done:
		return code, stderr, time.Since(start)
	case <-time.After(d):
		t.Fatalf("stallfs %v still running after %v", args, d)
		return 0, "", 0
	}
}

func TestFaultHungDaemonForceUnmountAndRemount(t *testing.T) {
	d := newFltData(t, 8, 5000)
	mnt := testMountpoint(t)
	pid := mountDaemon(t, d.src, mnt, "--cache-mem", "0")
	if err := d.readFile(t, mnt, d.files[0]); err != nil {
		t.Fatal(err)
	}
	stopDaemon(t, pid)
	blocked := blockedRead(mnt, d.files[1])
	select {
	case err := <-blocked:
		t.Fatalf("a read of the stopped daemon's mount returned: %v", err)
	case <-time.After(300 * time.Millisecond): // only to let the read reach the kernel; the test holds either way
	}

	// A plain mount refuses the hung mountpoint in bounded time.
	code, stderr, took := stallfsWithin(t, 15*time.Second, "mount", d.src, mnt)
	t.Logf("mount over the hung mountpoint: exit %d after %v: %s", code, took.Round(time.Millisecond), strings.TrimSpace(stderr))
	if code != exitUsage || !strings.Contains(stderr, "stale mount") || !strings.Contains(stderr, "--force") {
		t.Errorf("mount over a hung mountpoint: exit %d, %q; want 2 and the explanation", code, stderr)
	}
	if took > fs.ProbeTimeout+5*time.Second {
		t.Errorf("mount over a hung mountpoint took %v to refuse", took)
	}

	code, stderr, took = stallfsWithin(t, 20*time.Second, "unmount", "--force", mnt)
	t.Logf("unmount --force of the hung mount: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("unmount --force: exit %d, %s", code, stderr)
	}
	if took > 2*fs.ProbeTimeout+6*time.Second {
		t.Errorf("unmount --force took %v", took)
	}
	select {
	case err := <-blocked:
		t.Logf("the blocked read returned: %v", err)
		if err == nil {
			t.Error("the blocked read succeeded from a stopped daemon")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked read did not return after unmount --force")
	}
	if isMounted(mnt) {
		t.Fatal("still mounted after unmount --force")
	}

	// The mountpoint is usable: a new mount serves every byte.
	pid = mountDaemon(t, d.src, mnt, "--cache-mem", "0")
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("new mount after unmount --force: %v", err)
	}

	// Hung again; mount --force recovers it (abort, detach, mount).
	stopDaemon(t, pid)
	blocked = blockedRead(mnt, d.files[2])
	logFile := filepath.Join(t.TempDir(), "force.log")
	code, stderr, took = stallfsWithin(t, 30*time.Second, "mount", "--force", "--daemon", "--log-file", logFile, "--cache-mem", "0", d.src, mnt)
	t.Logf("mount --force over the hung mount: exit %d after %v", code, took.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("mount --force over a hung mountpoint: exit %d, %s", code, stderr)
	}
	newPID := daemonPID(t, logFile)
	t.Cleanup(func() {
		if code, _, _ := stallfsCmd(t, "unmount", mnt); code != 0 {
			_ = syscall.Kill(newPID, syscall.SIGKILL)
		}
	})
	select {
	case err := <-blocked:
		if err == nil {
			t.Error("the blocked read succeeded from a stopped daemon")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked read did not return after mount --force")
	}
	if err := d.readAll(t, mnt); err != nil {
		t.Fatalf("mount --force over the hung mountpoint: %v", err)
	}
	if err := d.readFile(t, mnt, d.files[1]); errors.Is(err, syscall.ENOTCONN) {
		t.Fatal("the new mount serves the aborted connection")
	}
}
