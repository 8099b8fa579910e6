package main

// Peer faults through real mounts on 127.0.0.1, measured from one member
// (A) that reads every file of the dataset in each phase with 4 readers,
// timing every read: a member killed (SIGKILL) mid-epoch, a member
// partitioned (its address is a fault proxy that stops answering), the
// same address answering garbage bodies, and a member with a different
// secret. Reads keep working from the backend, every byte right, and no
// read waits longer than the peer item timeout plus a margin.
// TestE2EPeersGroup covers the group's byte accounting and a killed
// member's restart; this test covers the bound on read latency.

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend/throttle/faultproxy"
)

// peerItemTimeout is peers.Options.ItemTimeout's default, which mounts use.
const peerItemTimeout = 5 * time.Second

// readTimed reads every file through mnt with 4 readers, checks every byte
// and returns the longest read. A failed or wrong read fails the test.
func readTimed(t *testing.T, mnt string, files []string, during func(done int)) time.Duration {
	t.Helper()
	var mu sync.Mutex
	var worst time.Duration
	next := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for p := range next {
				start := time.Now()
				got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
				took := time.Since(start)
				switch {
				case err != nil:
					t.Errorf("%s: %v", p, err)
				case !bytes.Equal(got, pattern(p, len(got))):
					t.Errorf("%s: %d bytes read differ from the source", p, len(got))
				}
				mu.Lock()
				worst = max(worst, took)
				mu.Unlock()
			}
		})
	}
	for i, p := range files {
		if during != nil {
			during(i)
		}
		next <- p
	}
	close(next)
	wg.Wait()
	return worst
}

// waitPeers polls m's view until every member of addrs is up.
func waitPeers(t *testing.T, m *peerMember, addrs ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := true
		for _, a := range addrs {
			if up, _, _, _ := peerView(t, m, a); !up {
				all = false
			}
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: members %v not all up after 20s: %+v", m.addr, addrs, m.peers(t))
		}
		<-time.After(50 * time.Millisecond) // poll interval, not a synchronisation
	}
}

// peerView returns A's view of member addr.
func peerView(t *testing.T, m *peerMember, addr string) (up bool, requests, failures, badCRC int64) {
	t.Helper()
	for _, p := range m.peers(t).Peers {
		if p.Addr == addr {
			return p.Up, p.Requests, p.Failures, p.BadChecksums
		}
	}
	t.Fatalf("%s does not list member %s", m.addr, addr)
	return
}

func TestFaultPeersKilledPartitionedGarbageWrongSecret(t *testing.T) {
	stallfsBinary(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	files, total := peerDataset(t, src, 120)
	secret, other := filepath.Join(dir, "secret"), filepath.Join(dir, "other-secret")
	for f, s := range map[string]string{secret: "group-secret-for-the-test", other: "some-other-secret"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A, B and D are members; P is a fault proxy in front of C, a mount
	// that is a group of its own (it serves every item it is asked for).
	addrs := freePorts(t, 4)
	a, b, c, d := addrs[0], addrs[1], addrs[2], addrs[3]
	px, err := faultproxy.Start("http://" + c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	p := px.Addr()
	members := strings.Join([]string{a, b, p, d}, ",")
	cacheMem := strconv.FormatInt(total/4, 10)
	member := func(name, addr string) *peerMember {
		m := &peerMember{addr: addr, mnt: filepath.Join(dir, "mnt-"+name), cacheDir: filepath.Join(dir, "cache-"+name)}
		if err := os.Mkdir(m.mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		return m
	}
	common := []string{"--cache-mem", cacheMem, "--cache-disk", "0"}
	mc := member("c", c)
	mc.start(t, src, append([]string{"--peers", c, "--peer-secret-file", secret}, common...)...)
	ma, mb, md := member("a", a), member("b", b), member("d", d)
	for _, m := range []*peerMember{ma, mb} {
		m.start(t, src, append([]string{"--peers", members, "--peer-secret-file", secret}, common...)...)
	}
	md.start(t, src, append([]string{"--peers", members, "--peer-secret-file", other}, common...)...)
	waitPeers(t, ma, b, p) // C behind P; D refuses A's token once asked
	bound := peerItemTimeout + 3*time.Second
	check := func(phase string, worst time.Duration) {
		t.Helper()
		t.Logf("%-34s longest read %v", phase+":", worst.Round(time.Millisecond))
		if worst > bound {
			t.Errorf("%s: a read took %v, more than the peer item timeout %v plus 3s", phase, worst, peerItemTimeout)
		}
	}

	// Healthy: A gets items from B and from C through P.
	check("healthy group", readTimed(t, ma.mnt, files, nil))
	if _, n, _, _ := peerView(t, ma, p); n == 0 {
		t.Fatal("A asked P for nothing; the proxy path is not exercised")
	}
	if up, _, _, _ := peerView(t, ma, d); up {
		t.Error("A counts D (another secret) as live")
	}
	check("D, wrong secret, reads", readTimed(t, md.mnt, files, nil))
	if dv := md.peers(t); dv.Live != 1 {
		t.Errorf("D (another secret) sees %d live members, want only itself", dv.Live)
	}

	// B killed a quarter into the epoch.
	check("B killed mid-epoch", readTimed(t, ma.mnt, files, func(i int) {
		if i == len(files)/4 {
			if err := mb.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}))
	<-mb.proc.done
	if up, _, _, _ := peerView(t, ma, b); up {
		t.Error("A still counts the killed B as live")
	}

	// P partitioned a quarter into the epoch: requests to it are never
	// answered (new connections too).
	_, reqBefore, _, _ := peerView(t, ma, p)
	check("P partitioned mid-epoch", readTimed(t, ma.mnt, files, func(i int) {
		if i == len(files)/4 {
			px.Set(faultproxy.Fault{Mode: faultproxy.Blackhole})
		}
	}))
	up, reqAfter, fails, _ := peerView(t, ma, p)
	t.Logf("P partitioned: %d requests to it, %d failed, up %v", reqAfter-reqBefore, fails, up)
	if up || fails == 0 {
		t.Errorf("A's view of the partitioned P: up %v, %d failures; want down after a failure", up, fails)
	}

	// P answers again, but with garbage bodies (status and headers
	// right): once the prober takes P back, its items fail their
	// checksums and come from the backend.
	px.Set(faultproxy.Fault{Mode: faultproxy.Garbage})
	waitPeers(t, ma, p)
	check("P answering garbage", readTimed(t, ma.mnt, files, nil))
	_, _, _, bad := peerView(t, ma, p)
	if bad == 0 {
		t.Error("A counted no bad checksum from P answering garbage")
	}
	t.Logf("garbage from P: %d items failed their checksum", bad)
}
