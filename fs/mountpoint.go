package fs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
	// ErrHungMount reports a FUSE mount whose daemon holds the connection
	// but does not answer (stopped, or killed during start-up while
	// another process kept the connection): every access to it blocks.
	// An error that wraps it also satisfies errors.Is(err,
	// ErrStaleMount): ForceUnmount clears it.
	ErrHungMount = errors.New("hung mount: the file system's daemon does not answer")
)

// ProbeTimeout bounds how long CheckMountpoint and ForceUnmount wait for a
// FUSE daemon to answer before they call its mount hung.
const ProbeTimeout = 2 * time.Second

// hungError is a hung mountpoint: ErrHungMount, and so ErrStaleMount.
type hungError struct{ path string }

func (e *hungError) Error() string { return e.path + ": " + ErrHungMount.Error() }

func (e *hungError) Is(target error) bool {
	return target == ErrHungMount || target == ErrStaleMount
}

// errNoAnswer is a probe that ran out of time.
var errNoAnswer = errors.New("no answer")

// bounded runs f on its own goroutine and returns its error, or
// errNoAnswer when f has not returned within d. A call stuck on a hung
// FUSE mount is left behind; it returns once the connection is aborted.
func bounded(d time.Duration, f func() error) error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		return errNoAnswer
	}
}

// probeFUSE asks the daemon of the FUSE mount at path for statfs, which
// the kernel never answers from a cache: nil (it answers), ENOTCONN (it is
// gone) or errNoAnswer (hung).
func probeFUSE(path string) error {
	return bounded(ProbeTimeout, func() error {
		var st unix.Statfs_t
		return unix.Statfs(path, &st)
	})
}

// CheckMountpoint reports whether path can be mounted on: an existing
// directory that is not a mountpoint already. It recognises a stale FUSE
// mount (ErrStaleMount) and, within ProbeTimeout, a hung one
// (ErrHungMount).
func CheckMountpoint(path string) error {
	err := bounded(ProbeTimeout, func() error { return checkMountpoint(path) })
	if errors.Is(err, errNoAnswer) {
		// Only an access to a FUSE mount blocks like this: the path
		// itself or a directory on its way.
		return &hungError{path: path}
	}
	return err
}

func checkMountpoint(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, unix.ENOTCONN):
		return fmt.Errorf("%s: %w", path, ErrStaleMount)
	case err != nil:
		return fmt.Errorf("mountpoint: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("%s: %w", path, ErrNotDirectory)
	}
	e, err := findMountinfo(path)
	if err != nil {
		return err
	}
	if e == nil {
		return nil
	}
	// The kernel may have answered stat from its attribute cache; ask
	// the daemon itself.
	if strings.HasPrefix(e.fstype, "fuse") {
		switch err := probeFUSE(e.mountpoint); {
		case errors.Is(err, errNoAnswer):
			return &hungError{path: path}
		case errors.Is(err, unix.ENOTCONN):
			return fmt.Errorf("%s: %w", path, ErrStaleMount)
		}
	}
	return fmt.Errorf("%s: %w", path, ErrAlreadyMounted)
}

// IsMountpoint reports whether path is the mountpoint of a mounted file
// system, per /proc/self/mountinfo. It works on stale mounts too, where
// stat fails.
func IsMountpoint(path string) (bool, error) {
	e, err := findMountinfo(path)
	return e != nil, err
}

// mountinfoEntry is what this package needs of a /proc/self/mountinfo line.
type mountinfoEntry struct {
	mountpoint   string
	major, minor uint32
	fstype       string
}

// findMountinfo returns the entry whose mountpoint is path (the last one,
// the visible one, when several are stacked), or nil.
func findMountinfo(path string) (*mountinfoEntry, error) {
	abs, err := canonical(path)
	if err != nil {
		return nil, err
	}
	return lookupMountinfo(abs)
}

// lookupMountinfo is findMountinfo of a canonical path.
func lookupMountinfo(abs string) (*mountinfoEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var found *mountinfoEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options ... - fstype source ...
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != abs {
			continue
		}
		e := &mountinfoEntry{mountpoint: abs}
		if ma, mi, ok := strings.Cut(fields[2], ":"); ok {
			a, _ := strconv.ParseUint(ma, 10, 32)
			b, _ := strconv.ParseUint(mi, 10, 32)
			e.major, e.minor = uint32(a), uint32(b)
		}
		for i := 6; i+1 < len(fields); i++ {
			if fields[i] == "-" {
				e.fstype = fields[i+1]
				break
			}
		}
		found = e
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return found, nil
}

// canonical returns path made absolute with its symlinks resolved. A
// mountpoint (never a symlink) is recognised from its parent and the mount
// table without touching it: on a stale or hung mount, an access to it
// fails or blocks.
func canonical(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	dir, base := filepath.Split(abs)
	if base == "" {
		return filepath.Clean(abs), nil
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	cand := filepath.Join(dir, base)
	if e, err := lookupMountinfo(cand); err == nil && e != nil {
		return cand, nil
	}
	var r string
	if bounded(ProbeTimeout, func() error {
		var err error
		r, err = filepath.EvalSymlinks(abs)
		return err
	}) == nil {
		return r, nil
	}
	return cand, nil
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
// When the mount is a FUSE mount whose daemon does not answer within
// ProbeTimeout (hung), its connection is aborted first (AbortConnection),
// so that the processes blocked on it get ENOTCONN instead of waiting
// forever. Without privilege it falls back to fusermount3 -u -z.
func ForceUnmount(path string) error {
	abs, err := canonical(path)
	if err != nil {
		return err
	}
	if e, _ := findMountinfo(abs); e != nil && strings.HasPrefix(e.fstype, "fuse") {
		if errors.Is(probeFUSE(abs), errNoAnswer) {
			if err := abortConnection(e); err != nil {
				return fmt.Errorf("unmount %s: %w", abs, err)
			}
			removeDeadSocket(abs)
		}
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

// removeDeadSocket removes the control socket of a mountpoint whose daemon
// was found hung, unless something answers on it within a second: a
// stopped daemon still listens, and a new mount would take the socket for
// a live one. (ControlSocketPath asks the mountpoint itself, which blocks.)
func removeDeadSocket(abs string) {
	p, err := derivedSocketPath(abs, false)
	if err != nil || socketAnswers(p, time.Second) {
		return
	}
	_ = os.Remove(p)
}

// socketAnswers reports whether an HTTP request on the unix socket path
// gets any answer within d.
func socketAnswers(path string, d time.Duration) bool {
	c, err := net.DialTimeout("unix", path, d)
	if err != nil {
		return false
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return false
	}
	if _, err := io.WriteString(c, "GET /v1/status HTTP/1.0\r\nHost: stallfs\r\n\r\n"); err != nil {
		return false
	}
	var b [1]byte
	n, _ := c.Read(b[:])
	return n > 0
}

// fusectlDir is where the fusectl file system is mounted by convention.
const fusectlDir = "/sys/fs/fuse/connections"

// AbortConnection aborts the connection of the FUSE mount at path through
// fusectl (/sys/fs/fuse/connections/N/abort, N its device number): every
// request waiting on the daemon fails with ENOTCONN at once, and so does
// every later access until the mount is detached. fusectl is mounted for
// the call when it is not, and unmounted again. It needs privilege.
func AbortConnection(path string) error {
	e, err := findMountinfo(path)
	switch {
	case err != nil:
		return err
	case e == nil:
		return fmt.Errorf("abort %s: not a mountpoint", path)
	case !strings.HasPrefix(e.fstype, "fuse"):
		return fmt.Errorf("abort %s: a %s mount, not FUSE", path, e.fstype)
	}
	return abortConnection(e)
}

func abortConnection(e *mountinfoEntry) error {
	// The kernel names a connection by its superblock's dev_t in the
	// kernel's own encoding (MKDEV: major << 20 | minor).
	id := strconv.FormatUint(uint64(e.major)<<20|uint64(e.minor), 10)
	if _, err := os.Stat(filepath.Join(fusectlDir, id)); err != nil {
		mounted, merr := IsMountpoint(fusectlDir)
		if merr != nil {
			return fmt.Errorf("abort %s: %w", e.mountpoint, merr)
		}
		if mounted {
			return fmt.Errorf("abort %s: no connection %s in %s: %w", e.mountpoint, id, fusectlDir, err)
		}
		if err := unix.Mount("fusectl", fusectlDir, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("abort %s: mount fusectl on %s: %w", e.mountpoint, fusectlDir, err)
		}
		defer unix.Unmount(fusectlDir, unix.MNT_DETACH)
	}
	f, err := os.OpenFile(filepath.Join(fusectlDir, id, "abort"), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("abort %s: %w", e.mountpoint, err)
	}
	defer f.Close()
	if _, err := f.WriteString("1"); err != nil {
		return fmt.Errorf("abort %s: %w", e.mountpoint, err)
	}
	return nil
}
