package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/stallfs/stallfs/fs"
)

// controlClient talks HTTP to a mount's control socket, found from the
// mountpoint with fs.ControlSocketPath.
type controlClient struct {
	socket string
	http   *http.Client
}

// newControlClient returns a client for the mount at mountpoint. It does
// not connect; a path that is not a live stallfs mount fails on the first
// request.
func newControlClient(mountpoint string) (*controlClient, error) {
	sock, err := fs.ControlSocketPath(mountpoint)
	if err != nil {
		return nil, err
	}
	return &controlClient{socket: sock, http: socketHTTPClient(sock, 0)}, nil
}

// socketHTTPClient talks HTTP over the unix socket at sock (the host part of
// request URLs is ignored); timeout 0 means none.
func socketHTTPClient(sock string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", sock)
			},
		},
	}
}

// getJSON GETs path (e.g. "/v1/status") and decodes the JSON answer into v.
func (c *controlClient) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://stallfs"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("control socket %s: GET %s: %s", c.socket, path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("control socket %s: GET %s: %w", c.socket, path, err)
	}
	return nil
}

// mountPID asks the mount at mountpoint for the pid of the process serving
// it; 0 when it cannot tell (not a stallfs mount, stale, no socket).
func mountPID(ctx context.Context, mountpoint string) int {
	c, err := newControlClient(mountpoint)
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var st fs.Status
	if err := c.getJSON(ctx, "/v1/status", &st); err != nil || st.Mountpoint != mountpoint {
		return 0
	}
	return st.PID
}

// waitProcessExit polls until process pid is gone (or a zombie) or ctx is
// done; it reports whether it is gone.
func waitProcessExit(ctx context.Context, pid int) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if processGone(pid) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// processGone reports whether pid no longer runs. A zombie counts as gone:
// a daemon's parent may be slow to reap it.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}
