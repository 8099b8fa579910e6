package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hungMount mounts a FUSE file system on a fresh directory whose
// /dev/fuse descriptor stays open and is never read: the kernel's INIT and
// every later request wait forever, like a daemon stopped or killed during
// start-up while another process kept the connection.
func hungMount(t *testing.T) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "hung")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := syscall.Mount("stallfs-test", mnt, "fuse.stallfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Close(fd) // ends the connection if the test did not
		unix.Unmount(mnt, unix.MNT_DETACH)
	})
	return mnt
}

// within runs f and fails the test unless it returns within d.
func within(t *testing.T, what string, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func TestHungMountDetectedAndAborted(t *testing.T) {
	fusectlBefore, err := IsMountpoint(fusectlDir)
	if err != nil {
		t.Fatal(err)
	}
	mnt := hungMount(t)
	// A process blocked on the mount, as a reader would be.
	stuck := make(chan error, 1)
	go func() {
		_, err := os.Stat(filepath.Join(mnt, "x"))
		stuck <- err
	}()

	within(t, "CheckMountpoint", ProbeTimeout+3*time.Second, func() {
		err := CheckMountpoint(mnt)
		if !errors.Is(err, ErrHungMount) || !errors.Is(err, ErrStaleMount) {
			t.Errorf("CheckMountpoint(hung) = %v, want ErrHungMount and ErrStaleMount", err)
		}
	})
	select {
	case err := <-stuck:
		t.Fatalf("stat of the hung mount returned before the abort: %v", err)
	default:
	}
	start := time.Now()
	within(t, "ForceUnmount", 3*ProbeTimeout+3*time.Second, func() {
		if err := ForceUnmount(mnt); err != nil {
			t.Errorf("ForceUnmount(hung): %v", err)
		}
	})
	t.Logf("ForceUnmount of the hung mount took %v", time.Since(start).Round(time.Millisecond))
	select {
	case err := <-stuck:
		if err == nil {
			t.Error("the blocked stat succeeded")
		}
		t.Logf("the blocked stat returned: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked stat did not return after the abort")
	}
	if err := CheckMountpoint(mnt); err != nil {
		t.Errorf("CheckMountpoint after ForceUnmount: %v", err)
	}
	if after, err := IsMountpoint(fusectlDir); err != nil || after != fusectlBefore {
		t.Errorf("fusectl mounted on %s: %v before, %v after (%v); want it left as it was", fusectlDir, fusectlBefore, after, err)
	}
}

func TestAbortConnectionRefusesNonFUSE(t *testing.T) {
	if err := AbortConnection(t.TempDir()); err == nil {
		t.Error("AbortConnection of a plain directory succeeded")
	}
	if err := AbortConnection("/proc"); err == nil {
		t.Error("AbortConnection of /proc (not FUSE) succeeded")
	}
}
