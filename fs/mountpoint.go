package fs

import (
	"bufio"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Errors of CheckMountpoint. They are wrapped with the path; compare with
// errors.Is. A missing mountpoint is an error satisfying
// errors.Is(err, io/fs.ErrNotExist).
var (
	// ErrStaleMount reports a mountpoint left by a FUSE daemon that died:
	// the kernel still has the mount but nobody serves it ("transport
	// endpoint is not connected"). ForceUnmount clears it.
	ErrStaleMount = errors.New("stale mount: the file system's daemon is gone (transport endpoint is not connected); unmount it first")
	// ErrAlreadyMounted reports a mountpoint that already has a file
	// system mounted on it.
	ErrAlreadyMounted = errors.New("already a mountpoint")
	// ErrNotDirectory reports a mountpoint that is not a directory.
	ErrNotDirectory = errors.New("not a directory")
)

// CheckMountpoint reports whether path can be mounted on: an existing
// directory that is not a mountpoint already. It recognises a stale FUSE
// mount (ErrStaleMount).
func CheckMountpoint(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, unix.ENOTCONN):
		return fmt.Errorf("%s: %w", path, ErrStaleMount)
	case err != nil:
		return fmt.Errorf("mountpoint: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("%s: %w", path, ErrNotDirectory)
	}
	mounted, err := IsMountpoint(path)
	if err != nil {
		return err
	}
	if mounted {
		return fmt.Errorf("%s: %w", path, ErrAlreadyMounted)
	}
	return nil
}

// IsMountpoint reports whether path is the mountpoint of a mounted file
// system, per /proc/self/mountinfo. It works on stale mounts too, where
// stat fails.
func IsMountpoint(path string) (bool, error) {
	abs, err := canonical(path)
	if err != nil {
		return false, err
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ...
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 && unescapeMountinfo(fields[4]) == abs {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	return false, nil
}

// canonical returns path made absolute with its symlinks resolved. On a
// stale mountpoint, where the last element cannot be resolved, only its
// parent is.
func canonical(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r, nil
	}
	dir, base := filepath.Split(abs)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	if base == "" {
		return filepath.Clean(dir), nil
	}
	return filepath.Join(dir, base), nil
}

// unescapeMountinfo undoes the octal escapes (\040 for space, \011, \012,
// \134) of /proc/self/mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ForceUnmount detaches the file system at path lazily (umount -l): the
// name is freed at once, also for a stale mount or one with open files.
// Without privilege it falls back to fusermount3 -u -z.
func ForceUnmount(path string) error {
	abs, err := canonical(path)
	if err != nil {
		return err
	}
	err = unix.Unmount(abs, unix.MNT_DETACH)
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EPERM) {
		for _, bin := range []string{"fusermount3", "fusermount"} {
			if p, lerr := exec.LookPath(bin); lerr == nil {
				out, cerr := exec.Command(p, "-u", "-z", abs).CombinedOutput()
				if cerr == nil {
					return nil
				}
				return fmt.Errorf("%s -u -z %s: %w: %s", bin, abs, cerr, strings.TrimSpace(string(out)))
			}
		}
	}
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: not a mountpoint: %w", abs, err)
	}
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", abs, iofs.ErrNotExist)
	}
	return fmt.Errorf("unmount %s: %w", abs, err)
}
