// Package azuritetest runs a real Azurite blob service for tests: the
// azurite npm package pinned in testdata/azurite (installed with `npm ci`
// on first use), on 127.0.0.1 at a free port, with in-memory persistence,
// stopped when the test ends.
package azuritetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/stallfs/stallfs/backend/internal/servertest"
)

// The well-known development account that Azurite serves. The key is
// public (it is in every Azure emulator's documentation), not a secret.
const (
	Account = "devstoreaccount1"
	Key     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// startTimeout bounds how long Azurite may take to listen.
const startTimeout = 60 * time.Second

// Server is a running Azurite blob service.
type Server struct {
	// Endpoint is the blob service URL, http://127.0.0.1:PORT/devstoreaccount1.
	Endpoint string
	// Port is the TCP port on 127.0.0.1.
	Port int

	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	output   *servertest.Buffer
	work     string // Azurite's working directory
	stopOnce sync.Once
}

var containerSeq atomic.Int64

// Start runs an Azurite of the test's own and stops it in t.Cleanup. It
// installs the pinned Azurite first if testdata/azurite/node_modules is
// missing.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := launch()
	if err != nil {
		t.Fatalf("azuritetest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// shared is the server of Shared.
var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns one Azurite for every test of the binary that calls it,
// started on first use (it takes a few seconds); tests keep apart by using
// containers of their own (NewContainer). TestMain stops it with
// StopShared after m.Run.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = launch() })
	if shared.err != nil {
		t.Fatalf("azuritetest: %v", shared.err)
	}
	return shared.srv
}

// StopShared stops the server of Shared, if it was started.
func StopShared() {
	if shared.srv != nil {
		shared.srv.Stop()
	}
}

// launch installs Azurite if needed and starts it.
func launch() (*Server, error) {
	root, err := servertest.RepoRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "testdata", "azurite")
	if err := install(dir); err != nil {
		return nil, err
	}
	main := filepath.Join(dir, "node_modules", "azurite", "dist", "src", "blob", "main.js")
	var lastErr error
	for range 3 { // a free port can be taken between probe and listen
		s, err := start(main)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(main string) (*Server, error) {
	port, err := servertest.FreePort()
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp("", "azurite-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("node", main,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
		"--inMemoryPersistence", "--skipApiVersionCheck", "--loose", "--silent",
		"--extentMemoryLimit", "2048")
	cmd.Dir = work // Azurite may write debug files to its working directory
	out := &servertest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(work)
		return nil, fmt.Errorf("start azurite: %w", err)
	}
	s := &Server{
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d/%s", port, Account),
		Port:     port, cmd: cmd, done: make(chan struct{}), output: out, work: work,
	}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := servertest.WaitListening(port, s.done, startTimeout); err != nil {
		s.Stop()
		return nil, fmt.Errorf("azurite %w: %s", err, out.String())
	}
	return s, nil
}

// Stop ends Azurite (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		os.RemoveAll(s.work)
	})
}

// ConnectionString is a connection string for the server's account.
func (s *Server) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;",
		Account, Key, s.Endpoint)
}

// Client returns a container client for name, authenticated with the key.
func (s *Server) Client(t testing.TB, name string) *container.Client {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(Account, Key)
	if err != nil {
		t.Fatalf("azuritetest: %v", err)
	}
	c, err := container.NewClientWithSharedKeyCredential(s.Endpoint+"/"+name, cred, nil)
	if err != nil {
		t.Fatalf("azuritetest: %v", err)
	}
	return c
}

// NewContainer creates a container with a name unique to this process and
// returns the name.
func (s *Server) NewContainer(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("c%d-%d", os.Getpid(), containerSeq.Add(1))
	if _, err := s.Client(t, name).Create(context.Background(), nil); err != nil {
		t.Fatalf("azuritetest: create container %s: %v", name, err)
	}
	return name
}

// Put creates or replaces blob name in container with data.
func (s *Server) Put(t testing.TB, containerName, name string, data []byte) {
	t.Helper()
	bc := s.Client(t, containerName).NewBlockBlobClient(name)
	if _, err := bc.UploadBuffer(context.Background(), data, &blockblob.UploadBufferOptions{}); err != nil {
		t.Fatalf("azuritetest: put %s/%s: %v", containerName, name, err)
	}
}

// Output is what Azurite printed (for failure messages).
func (s *Server) Output() string { return s.output.String() }

// install runs `npm ci` in dir unless Azurite is there, holding an
// exclusive lock on a file in the temporary directory so that the test
// binaries of several packages running at once install it once.
func install(dir string) error {
	marker := filepath.Join(dir, "node_modules", "azurite", "package.json")
	if installed(marker) {
		return nil
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "stallfs-azurite-install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("lock azurite install: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock azurite install: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if installed(marker) {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--prefix", dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm ci --prefix %s: %w\n%s", dir, err, out)
	}
	if !installed(marker) {
		return fmt.Errorf("npm ci --prefix %s did not install azurite", dir)
	}
	return nil
}

func installed(marker string) bool {
	b, err := os.ReadFile(marker)
	return err == nil && strings.Contains(string(b), `"version": "3.37.0"`)
}
