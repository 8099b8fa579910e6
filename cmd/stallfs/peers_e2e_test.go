package main

// End-to-end tests of the peer group: three real stallfs processes on
// 127.0.0.1 over one local source, each reading its own shard.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/peers"
)

// peerMember is one stallfs process of the test group.
type peerMember struct {
	addr, mnt, cacheDir string
	proc                *mountProc
}

// peerDataset writes n files of 20..100 KB (one item each, one FUSE read
// each) and returns their paths and total size.
func peerDataset(t *testing.T, src string, n int) ([]string, int64) {
	t.Helper()
	return peerDatasetTo(n, func(p string, data []byte) {
		full := filepath.Join(src, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

// peerDatasetTo is peerDataset writing each file with put.
func peerDatasetTo(n int, put func(p string, data []byte)) ([]string, int64) {
	rng := rand.New(rand.NewPCG(3, 3))
	var paths []string
	var total int64
	for i := range n {
		p := fmt.Sprintf("c%d/img%04d.jpg", i%5, i)
		size := 20_000 + rng.IntN(80_000)
		put(p, pattern(p, size))
		paths = append(paths, p)
		total += int64(size)
	}
	return paths, total
}

// freePorts returns n distinct 127.0.0.1 addresses nothing listens on.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var lns []net.Listener
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return addrs
}

// start mounts the member and arranges its unmount (after the process is
// killed by startForeground's cleanup).
func (m *peerMember) start(t *testing.T, src string, args ...string) {
	t.Helper()
	t.Cleanup(func() {
		if isMounted(m.mnt) {
			_ = unmountPath(m.mnt, true)
		}
	})
	m.proc = startForeground(t, src, m.mnt, append([]string{"--cache-dir", m.cacheDir, "--peer-listen", m.addr}, args...)...)
}

type peersDoc struct {
	peers.Stats
	Fills struct {
		PeerBytes     int64 `json:"peer_bytes"`
		PeerFallbacks int64 `json:"peer_fallbacks"`
		BackendBytes  int64 `json:"backend_bytes"`
	} `json:"fills"`
}

func (m *peerMember) peers(t *testing.T) peersDoc {
	t.Helper()
	c, err := newControlClient(m.mnt)
	if err != nil {
		t.Fatal(err)
	}
	var d peersDoc
	if err := c.getJSON(t.Context(), "/v1/peers", &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// cachedBytes is the item bytes in the member's caches.
func (m *peerMember) cachedBytes(t *testing.T) int64 {
	t.Helper()
	c, err := newControlClient(m.mnt)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Info struct {
			Memory struct {
				Used int64 `json:"used_bytes"`
				Lost int64 `json:"lost_bytes"`
			} `json:"memory"`
			Disk struct {
				Items int64 `json:"items"`
			} `json:"disk"`
		} `json:"info"`
	}
	if err := c.getJSON(t.Context(), "/v1/cache", &d); err != nil {
		t.Fatal(err)
	}
	if d.Info.Disk.Items != 0 {
		t.Fatalf("%s: %d items on disk; the test uses the memory tier only", m.addr, d.Info.Disk.Items)
	}
	return d.Info.Memory.Used - d.Info.Memory.Lost
}

// shard returns rank's files of epoch e, DistributedSampler style: one
// seeded permutation per epoch, rank r takes positions r, r+world, ...
func shard(files []string, epoch, rank, world int) []string {
	perm := rand.New(rand.NewPCG(42, uint64(epoch))).Perm(len(files))
	var out []string
	for i := rank; i < len(perm); i += world {
		out = append(out, files[perm[i]])
	}
	return out
}

// readShard reads files through mnt with 4 goroutines and checks every
// byte; it returns the first error.
func readShard(mnt string, files []string) error {
	var next atomic.Int64
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(files)) {
					return
				}
				p := files[i]
				got, err := os.ReadFile(filepath.Join(mnt, filepath.FromSlash(p)))
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, pattern(p, len(got))) {
					errs <- fmt.Errorf("%s: %d bytes read differ from the source", p, len(got))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// epoch has every member in ranks read its shard concurrently.
func epoch(t *testing.T, ms []*peerMember, files []string, e int, ranks ...int) {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := readShard(ms[r].mnt, shard(files, e, r, len(ms))); err != nil {
				t.Errorf("epoch %d, rank %d: %v", e, r, err)
			}
		}()
	}
	wg.Wait()
}

func backendBytes(t *testing.T, ms []*peerMember) int64 {
	var sum int64
	for _, m := range ms {
		sum += m.peers(t).Fills.BackendBytes
	}
	return sum
}

// waitUp polls m's view until every peer is up.
func waitUp(t *testing.T, m *peerMember, want int) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		if d := m.peers(t); d.Live == want {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("%s: peers not all up after 20s: %+v", m.addr, m.peers(t))
		case <-tick.C:
		}
	}
}

// TestE2EPeersGroup runs three members over one source, each with a memory
// cache of a fifth of the dataset: epochs 2-3 read from the backend exactly
// what the group's caches do not hold; a member killed mid-epoch costs the
// others no error; restarted, it rejoins; a wrong secret gets 401.
func TestE2EPeersGroup(t *testing.T) {
	stallfsBinary(t) // built once per test process; not part of the phases
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	files, total := peerDataset(t, src, 150)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("group-secret-for-the-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := freePorts(t, 3)
	memb := strings.Join(addrs, ",")
	cacheMem := strconv.FormatInt(total/5, 10)
	args := []string{"--peers", memb, "--peer-secret-file", secret, "--cache-mem", cacheMem, "--cache-disk", "0"}
	ms := make([]*peerMember, 3)
	for i := range ms {
		ms[i] = &peerMember{addr: addrs[i], mnt: filepath.Join(dir, "mnt"+strconv.Itoa(i)), cacheDir: filepath.Join(dir, "cache"+strconv.Itoa(i))}
		if err := os.Mkdir(ms[i].mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		ms[i].start(t, src, args...)
	}
	for _, m := range ms {
		waitUp(t, m, 3)
	}
	phase("3 members up")

	// Epoch 1 fills each owner's cache with items it owns.
	epoch(t, ms, files, 1, 0, 1, 2)
	var cached int64
	for _, m := range ms {
		cached += m.cachedBytes(t)
	}
	if cached > total*3/5 || cached < total/2 {
		t.Fatalf("group caches hold %d bytes, want about 3/5 of %d", cached, total)
	}
	before := backendBytes(t, ms)
	epoch(t, ms, files, 2, 0, 1, 2)
	epoch(t, ms, files, 3, 0, 1, 2)
	got := backendBytes(t, ms) - before
	want := 2 * max(0, total-cached)
	t.Logf("dataset %d B, group caches %d B: backend bytes in epochs 2-3 = %d, want %d", total, cached, got, want)
	if d := got - want; d > want/100 || -d > want/100 {
		t.Errorf("backend bytes in epochs 2-3 = %d, want %d within 1%%", got, want)
	}
	for _, m := range ms {
		d := m.peers(t)
		if d.Fills.PeerBytes == 0 || d.Served.Requests == 0 || d.Fills.PeerFallbacks != 0 {
			t.Errorf("%s: peer bytes %d, served %d, fallbacks %d; want traffic both ways and no fallback", m.addr, d.Fills.PeerBytes, d.Served.Requests, d.Fills.PeerFallbacks)
		}
	}

	phase("epochs 1-3")

	// Epoch 4: member 2 dies after the first half of the epoch, while the
	// second half is read.
	var wg sync.WaitGroup
	for r := range 2 {
		sh := shard(files, 4, r, 3)
		if err := readShard(ms[r].mnt, sh[:len(sh)/2]); err != nil {
			t.Fatalf("epoch 4, rank %d, first half: %v", r, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := readShard(ms[r].mnt, sh[len(sh)/2:]); err != nil {
				t.Errorf("epoch 4, rank %d, after the kill: %v", r, err)
			}
		}()
	}
	if err := ms[2].proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	<-ms[2].proc.done
	// Every item of the whole epoch still reads right without member 2.
	epoch(t, ms, files, 5, 0, 1)
	for _, m := range ms[:2] {
		if d := m.peers(t); d.Live != 2 {
			t.Errorf("%s: %d live members after the kill, want 2", m.addr, d.Live)
		}
	}
	if err := unmountPath(ms[2].mnt, true); err != nil {
		t.Fatal(err)
	}
	phase("epochs 4-5, member 2 killed")

	// Member 2 comes back and is taken back by the probes.
	ms[2].start(t, src, args...)
	waitUp(t, ms[0], 3)
	waitUp(t, ms[1], 3)
	waitUp(t, ms[2], 3)
	phase("member 2 rejoined")
	served := ms[2].peers(t).Served.Requests
	epoch(t, ms, files, 6, 0, 1, 2)
	if d := ms[2].peers(t); d.Served.Requests == served {
		t.Errorf("rejoined member served no request in epoch 6")
	}

	phase("epoch 6")

	// A client with the wrong secret is refused and counted.
	unauth := ms[0].peers(t).Served.Unauthorized
	target := "/v1/item?" + url.Values{"path": {files[0]}, "version": {"x"}, "chunk": {"0"}}.Encode()
	for _, key := range [][]byte{[]byte("wrong secret"), nil} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addrs[0]+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != nil {
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			h := hmac.New(sha256.New, key)
			h.Write([]byte("GET\n" + target + "\n" + ts))
			req.Header.Set(peers.AuthHeader, ts+":"+hex.EncodeToString(h.Sum(nil)))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("request with secret %q: %s, want 401", key, resp.Status)
		}
	}
	if d := ms[0].peers(t).Served.Unauthorized - unauth; d != 2 {
		t.Errorf("unauthorized count went up by %d, want 2", d)
	}
}

// TestE2EPeersBadFlags: bad peer flags exit 2 before mounting.
func TestE2EPeersBadFlags(t *testing.T) {
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	for _, d := range []string{src, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	good, open := filepath.Join(dir, "good"), filepath.Join(dir, "open")
	if err := os.WriteFile(good, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	list := "127.0.0.1:1,127.0.0.1:2"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--peers", list, "--peer-listen", "127.0.0.1:1", "--peer-secret-file", open}, "0600"},
		{[]string{"--peers", list, "--peer-listen", "127.0.0.1:1"}, "--peer-secret-file"},
		{[]string{"--peers", list, "--peer-listen", "127.0.0.1:3", "--peer-secret-file", good}, "not in the member list"},
		{[]string{"--peers", list, "--peer-secret-file", good}, "--peer-listen"},
		{[]string{"--peers", "127.0.0.1:1,nonsense", "--peer-listen", "127.0.0.1:1", "--peer-secret-file", good}, "nonsense"},
		{[]string{"--peer-listen", "127.0.0.1:1"}, "needs --peers"},
		{[]string{"--peers", list, "--peers-dns", "x", "--peer-listen", "127.0.0.1:1", "--peer-secret-file", good}, "give one of"},
	} {
		code, _, stderr := stallfsCmd(t, append([]string{"mount", src, mnt}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("mount %v: status %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
		if isMounted(mnt) {
			t.Fatalf("mount %v mounted", tc.args)
		}
	}
}

// TestPeerIdentityAndLists: the member list parsers and finding this
// member when it listens on every address.
func TestPeerIdentityAndLists(t *testing.T) {
	if got := splitMembers(" a:1,b:2\nc:3 ,, d:4\t"); strings.Join(got, "|") != "a:1|b:2|c:3|d:4" {
		t.Errorf("splitMembers = %q", got)
	}
	if got := splitMembers(stripComments([]byte("# group\na:1 # first\n\nb:2\n"))); strings.Join(got, "|") != "a:1|b:2" {
		t.Errorf("peers file = %q", got)
	}
	members := []string{"10.255.255.1:7070", "127.0.0.1:7070", "127.0.0.1:7071"}
	for _, tc := range []struct {
		listen, want string
	}{
		{"127.0.0.1:7071", "127.0.0.1:7071"},
		{":7070", "127.0.0.1:7070"},        // the member on a local address
		{"0.0.0.0:7070", "127.0.0.1:7070"}, // same
		{"127.0.0.2:7070", ""},             // a specific address not listed
		{":7072", ""},                      // no member with this port here
	} {
		got, err := identify(tc.listen, members)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("identify(%q) = %q, %v; want %q", tc.listen, got, err, tc.want)
		}
	}
}
