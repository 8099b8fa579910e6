package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// controlServer serves a mount's control API on a unix socket.
type controlServer struct {
	// immutable after startControl
	path string
	ln   net.Listener
	srv  *http.Server
	mux  *http.ServeMux
	done chan struct{} // closed when Serve returned
}

// Status is the answer of GET /v1/status on the control socket.
type Status struct {
	Source     string    `json:"source"`
	Mountpoint string    `json:"mountpoint"`
	Files      int       `json:"files"`
	Bytes      int64     `json:"bytes"`
	PID        int       `json:"pid"`
	Started    time.Time `json:"started"`
}

// Status returns the mount's status as served on the control socket.
func (m *Mount) Status() Status {
	return Status{
		Source:     m.source,
		Mountpoint: m.mountpoint,
		Files:      m.tree.files(),
		Bytes:      m.tree.bytes,
		PID:        os.Getpid(),
		Started:    m.started,
	}
}

func startControl(path string, m *Mount) (*controlServer, error) {
	if len(path) >= len(unix.RawSockaddrUnix{}.Path) {
		return nil, fmt.Errorf("control socket path %s: longer than %d bytes", path, len(unix.RawSockaddrUnix{}.Path)-1)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// A socket left by a crashed daemon is removed; a live one is not.
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s: in use by another stallfs", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	c := &controlServer{path: path, ln: ln, mux: http.NewServeMux(), done: make(chan struct{})}
	c.mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(m.Status())
	})
	c.srv = &http.Server{Handler: c.mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(c.done)
		c.srv.Serve(ln)
	}()
	return c, nil
}

// close stops the server and removes the socket.
func (c *controlServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.srv.Shutdown(ctx); err != nil {
		c.srv.Close()
	}
	<-c.done
	os.Remove(c.path)
}

// socketDirs are where derived control sockets live, in order of
// preference.
func socketDirs() []string {
	return []string{"/run/stallfs", filepath.Join(os.TempDir(), "stallfs")}
}

// derivedSocketPath returns the control socket path for an absolute
// mountpoint: <dir>/<first 16 hex digits of sha256(mountpoint)>.sock in
// the first of socketDirs that can hold it. With create it makes the
// directory (mode 0700); without, it returns the first existing socket.
func derivedSocketPath(absMountpoint string, create bool) (string, error) {
	sum := sha256.Sum256([]byte(absMountpoint))
	name := hex.EncodeToString(sum[:])[:16] + ".sock"
	var errs []error
	for _, dir := range socketDirs() {
		p := filepath.Join(dir, name)
		if !create {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			} else {
				errs = append(errs, err)
			}
			continue
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			errs = append(errs, err)
			continue
		}
		if unix.Access(dir, unix.W_OK|unix.X_OK) != nil {
			errs = append(errs, fmt.Errorf("%s: not writable", dir))
			continue
		}
		return p, nil
	}
	return "", fmt.Errorf("control socket for %s: %w", absMountpoint, errors.Join(errs...))
}

// ControlSocketPath finds the control socket of the stallfs mount at
// mountpoint: from the root's ControlXattr attribute, else from the path
// derived from the mountpoint (which a mount with an explicit
// Options.ControlSocket does not use).
func ControlSocketPath(mountpoint string) (string, error) {
	buf := make([]byte, 4096)
	if n, err := unix.Getxattr(mountpoint, ControlXattr, buf); err == nil && n > 0 {
		return string(buf[:n]), nil
	}
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return "", fmt.Errorf("%s: %w", mountpoint, err)
	}
	return derivedSocketPath(abs, false)
}
