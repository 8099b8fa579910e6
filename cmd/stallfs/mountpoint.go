package main

// Mountpoint helpers on top of fs.CheckMountpoint and fs.ForceUnmount: the
// CLI's messages, the file system type of a mount (unmount refuses
// anything but FUSE), a plain, non-lazy unmount and a forced one that also
// recovers a hung mount.

import (
	"bufio"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/stallfs/stallfs/fs"
)

// mountState is what lies at a mountpoint path.
type mountState int

const (
	mountFree    mountState = iota // a directory, nothing mounted on it
	mountStale                     // a FUSE mount whose server is gone (ENOTCONN)
	mountMounted                   // a live mount
)

// mountEntry is one line of /proc/self/mountinfo.
type mountEntry struct {
	Mountpoint string
	FSType     string
	Source     string
}

// inspectMountpoint reports the state of path (per fs.CheckMountpoint), or
// a usage error when path is missing or not a directory.
func inspectMountpoint(path string) (mountState, error) {
	err := fs.CheckMountpoint(path)
	switch {
	case err == nil:
		return mountFree, nil
	case errors.Is(err, fs.ErrStaleMount):
		return mountStale, nil
	case errors.Is(err, fs.ErrAlreadyMounted):
		return mountMounted, nil
	case errors.Is(err, fs.ErrNotDirectory):
		return mountFree, usagef("mountpoint %q is not a directory", path)
	case errors.Is(err, iofs.ErrNotExist):
		return mountFree, usagef("mountpoint %q does not exist", path)
	case errors.Is(err, iofs.ErrPermission):
		return mountFree, usagef("mountpoint %q is not accessible: permission denied", path)
	}
	return mountFree, usagef("mountpoint %q: %w", path, pathErrCause(err))
}

// staleMessage explains a stale mountpoint and how to recover it. A hung
// mount (fs.ErrHungMount: its daemon holds the connection but does not
// answer) is reported as stale too: --force recovers both.
func staleMessage(path string) string {
	return fmt.Sprintf("mountpoint %q is a stale mount (its daemon is gone or does not answer), left by a crashed or stopped stallfs; run `stallfs unmount %s` (with --force if it hangs) or mount with --force", path, path)
}

// forceUnmount is `stallfs unmount --force`: it aborts the FUSE connection
// when the daemon does not answer (fs.ForceUnmount), so that every process
// blocked on the mount gets an error, and detaches the mountpoint at once.
// It does not wait for the daemon, which may be stopped.
func forceUnmount(path string) error {
	if err := fs.ForceUnmount(path); err != nil {
		return fmt.Errorf("force unmount: %w", err)
	}
	return nil
}

// findMount returns the mountinfo entry whose mountpoint is path (the last
// one if several are stacked), or nil.
func findMount(path string) (*mountEntry, error) {
	canon := canonicalPath(path)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var found *mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		e, ok := parseMountinfoLine(sc.Text())
		if ok && e.Mountpoint == canon {
			found = &e
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return found, nil
}

// canonicalPath resolves symlinks in path's parent (path itself may be a
// stale mount that cannot be stat'ed) so that it compares equal to
// mountinfo's spelling.
func canonicalPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if abs == "/" {
		return abs
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return abs
	}
	return filepath.Join(dir, filepath.Base(abs))
}

// parseMountinfoLine parses one line of /proc/self/mountinfo (see proc(5)):
// "36 35 98:0 /root /mnt rw,noatime master:1 - ext3 /dev/root rw".
func parseMountinfoLine(line string) (mountEntry, bool) {
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if len(fields) < 5 || sep < 0 || sep+2 >= len(fields) {
		return mountEntry{}, false
	}
	return mountEntry{
		Mountpoint: unescapeMountinfo(fields[4]),
		FSType:     fields[sep+1],
		Source:     unescapeMountinfo(fields[sep+2]),
	}, true
}

// unescapeMountinfo decodes the octal escapes (\040 for a space) that the
// kernel writes for white space and backslashes.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// unmountPath unmounts the mount at path; lazy detaches it even while it is
// busy. Without privilege it falls back to fusermount3.
func unmountPath(path string, lazy bool) error {
	flags := 0
	if lazy {
		flags = unix.MNT_DETACH
	}
	err := unix.Unmount(path, flags)
	if errors.Is(err, unix.EPERM) {
		args := []string{"-u"}
		if lazy {
			args = append(args, "-z")
		}
		out, ferr := exec.Command("fusermount3", append(args, path)...).CombinedOutput()
		if ferr != nil {
			return fmt.Errorf("fusermount3 %s: %w: %s", strings.Join(args, " "), ferr, oneLine(string(out)))
		}
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "umount", Path: path, Err: err}
	}
	return nil
}
