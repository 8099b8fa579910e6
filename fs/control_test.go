package fs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
}

func getJSON(t *testing.T, c *http.Client, url string, v any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func TestControlSocketDefaultPath(t *testing.T) {
	src := t.TempDir()
	writePat(t, filepath.Join(src, "a"), 1, 1234)
	writePat(t, filepath.Join(src, "b", "c"), 2, 766)
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o755)
	m, err := New(t.Context(), mnt, dirBackend{root: src}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := m.ControlSocket()
	unmounted := false
	t.Cleanup(func() {
		if !unmounted {
			m.Unmount()
		}
	})
	wantPath, err := derivedSocketPath(mnt, false)
	if err != nil || wantPath != sock {
		t.Fatalf("socket %s, derived %s (%v)", sock, wantPath, err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&iofs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v mode %v, want a 0600 socket", sock, err, fi.Mode())
	}
	// Found from the mountpoint, by xattr.
	if got, err := ControlSocketPath(mnt); err != nil || got != sock {
		t.Fatalf("ControlSocketPath = %q, %v; want %q", got, err, sock)
	}
	c := unixClient(sock)
	var st Status
	getJSON(t, c, "http://stallfs/v1/status", &st)
	if st.Files != 2 || st.Bytes != 2000 || st.Mountpoint != mnt || st.PID != os.Getpid() ||
		!strings.HasPrefix(st.Source, "file://") || st.Started.IsZero() {
		t.Errorf("status = %+v", st)
	}
	// The lead's endpoints plug in while the mount serves.
	m.Handle("GET /v1/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]int{"files": m.Files()})
	}))
	var echo map[string]int
	getJSON(t, c, "http://stallfs/v1/echo", &echo)
	if echo["files"] != 2 {
		t.Errorf("echo = %v", echo)
	}
	// The default mux is untouched.
	if _, pattern := http.DefaultServeMux.Handler(&http.Request{Method: "GET", URL: mustURL("/v1/status")}); pattern != "" {
		t.Errorf("default mux has %q", pattern)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	unmounted = true
	if _, err := os.Stat(sock); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("socket left after unmount: %v", err)
	}
	if _, err := ControlSocketPath(mnt); err == nil {
		t.Errorf("ControlSocketPath found a socket after unmount")
	}
}

func TestControlSocketExplicitPathAndStaleSocket(t *testing.T) {
	src := t.TempDir()
	writePat(t, filepath.Join(src, "a"), 1, 10)
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	// A socket file left by a crashed daemon is replaced.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	m, mnt := mountDir(t, src, Options{ControlSocket: sock})
	if got, err := ControlSocketPath(mnt); err != nil || got != sock {
		t.Fatalf("ControlSocketPath = %q, %v; want %q", got, err, sock)
	}
	var st Status
	getJSON(t, unixClient(sock), "http://x/v1/status", &st)
	if st.Files != 1 {
		t.Errorf("status = %+v", st)
	}
	// A second mount may not take a live socket.
	mnt2 := filepath.Join(t.TempDir(), "mnt2")
	os.Mkdir(mnt2, 0o755)
	if m2, err := New(t.Context(), mnt2, dirBackend{root: src}, Options{ControlSocket: sock}); err == nil {
		m2.Unmount()
		t.Fatal("second mount took a live control socket")
	}
	_ = m
}

func mustURL(p string) *url.URL {
	u, _ := url.Parse(p)
	return u
}

func TestCheckMountpoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	if err := CheckMountpoint(dir); err != nil {
		t.Errorf("plain dir: %v", err)
	}
	if err := CheckMountpoint(filepath.Join(dir, "missing")); !errors.Is(err, iofs.ErrNotExist) {
		t.Errorf("missing: %v, want ErrNotExist", err)
	}
	if err := CheckMountpoint(file); !errors.Is(err, ErrNotDirectory) {
		t.Errorf("file: %v, want ErrNotDirectory", err)
	}
	src := t.TempDir()
	writePat(t, filepath.Join(src, "a"), 1, 10)
	_, mnt := mountDir(t, src, Options{})
	if err := CheckMountpoint(mnt); !errors.Is(err, ErrAlreadyMounted) {
		t.Errorf("mounted: %v, want ErrAlreadyMounted", err)
	}
	if _, err := New(t.Context(), mnt, dirBackend{root: src}, Options{ControlSocket: filepath.Join(t.TempDir(), "s")}); !errors.Is(err, ErrAlreadyMounted) {
		t.Errorf("New on a mountpoint: %v, want ErrAlreadyMounted", err)
	}
	if ok, err := IsMountpoint(mnt); !ok || err != nil {
		t.Errorf("IsMountpoint(mounted) = %v, %v", ok, err)
	}
	if ok, err := IsMountpoint(dir); ok || err != nil {
		t.Errorf("IsMountpoint(plain) = %v, %v", ok, err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(mnt, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckMountpoint(link); !errors.Is(err, ErrAlreadyMounted) {
		t.Errorf("symlink to a mountpoint: %v, want ErrAlreadyMounted", err)
	}
}

// TestStaleMountRecovery makes the mount a killed daemon leaves: a FUSE
// mount whose /dev/fuse descriptor is closed.
func TestStaleMountRecovery(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "with space")
	os.Mkdir(mnt, 0o755)
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := syscall.Mount("stallfs-test", mnt, "fuse.stallfs", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	syscall.Close(fd)
	if _, err := os.Stat(mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}
	if err := CheckMountpoint(mnt); !errors.Is(err, ErrStaleMount) {
		t.Fatalf("CheckMountpoint = %v, want ErrStaleMount", err)
	}
	if ok, err := IsMountpoint(mnt); !ok || err != nil {
		t.Fatalf("IsMountpoint(stale) = %v, %v", ok, err)
	}
	if err := ForceUnmount(mnt); err != nil {
		t.Fatalf("ForceUnmount: %v", err)
	}
	if err := CheckMountpoint(mnt); err != nil {
		t.Fatalf("after ForceUnmount: %v", err)
	}
	if err := ForceUnmount(mnt); err == nil {
		t.Error("ForceUnmount of a plain directory succeeded")
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/a/with\040space`: "/a/with space",
		`/tab\011x`:        "/tab\tx",
		`/back\134slash`:   `/back\slash`,
		`/plain`:           "/plain",
		`/trail\04`:        `/trail\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
