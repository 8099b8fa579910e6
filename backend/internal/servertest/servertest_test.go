package servertest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestWaitListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if err := WaitListening(port, nil, time.Second); err != nil {
		t.Errorf("listening port: %v", err)
	}

	free, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	close(exited)
	if err := WaitListening(free, exited, time.Minute); err == nil || !strings.Contains(err.Error(), "exited before listening on 127.0.0.1:"+strconv.Itoa(free)) {
		t.Errorf("exited server: %v", err)
	}
	if err := WaitListening(free, nil, 0); err == nil || !strings.Contains(err.Error(), "not listening") {
		t.Errorf("timeout: %v", err)
	}
}

func TestBufferAndRepoRoot(t *testing.T) {
	var b Buffer
	done := make(chan struct{})
	go func() { defer close(done); b.Write([]byte("a")) }()
	b.Write([]byte("b"))
	<-done
	if s := b.String(); s != "ab" && s != "ba" {
		t.Errorf("buffer holds %q", s)
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "backend", "internal", "servertest", "servertest.go")); err != nil {
		t.Errorf("RepoRoot %s: %v", root, err)
	}
}
