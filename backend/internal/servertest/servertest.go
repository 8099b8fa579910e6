// Package servertest holds what the helpers that run real object-store
// servers for tests (backend/s3/s3test, backend/azblob/azuritetest) share:
// a free port on 127.0.0.1, waiting until a started server listens, a
// buffer for its output, and the repository root. It uses the standard
// library only and never listens beyond 127.0.0.1.
package servertest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// FreePort asks the kernel for a port on 127.0.0.1 that is free at the
// moment; another process may take it before the caller listens.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// pollInterval is how often WaitListening tries to connect.
const pollInterval = 20 * time.Millisecond

// WaitListening polls 127.0.0.1:port until it accepts a connection
// (nil), exited is closed (the server process ended first), or timeout
// passes. The error names the address; the caller adds the server's name
// and output.
func WaitListening(port int, exited <-chan struct{}, timeout time.Duration) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %v", addr, timeout)
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before listening on %s", addr)
		case <-time.After(pollInterval): // poll interval, not a synchronisation
		}
	}
}

// Buffer is a bytes.Buffer that a process's output copiers and the test
// may use at once. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RepoRoot is the directory of the go.mod at or above the working
// directory (a test's working directory is its package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}
