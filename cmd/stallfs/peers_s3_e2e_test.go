package main

// End-to-end test of a peer group over the S3 server: three stallfs
// processes mount one bucket.

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stallfs/stallfs/backend/s3/s3test"
)

// groupDoc is the group what-if of GET /v1/stats.
type groupDoc struct {
	Peers struct {
		Group groupWhatIf `json:"group"`
	} `json:"peers"`
}

// TestE2EPeersS3 runs three members over one bucket, each with a memory
// cache of a fifth of the dataset: epoch 2 reads from the bucket exactly
// the bytes the group's caches do not hold, every byte is right, and the
// group what-if, the stats text and the Prometheus peer metrics agree.
func TestE2EPeersS3(t *testing.T) {
	stallfsBinary(t) // built once per test process; not part of the phases
	s3test.Binary(t) // versitygw, built once per machine; not part either
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.2fs %s", time.Since(t0).Seconds(), what) }
	srv := s3test.Start(t)
	srv.SetEnv(t)
	bucket := srv.NewBucket(t)
	files, total := peerDatasetTo(150, func(p string, data []byte) { srv.Put(t, bucket, p, data) })
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s3-group-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := freePorts(t, 4)
	metricsAddr := addrs[3]
	addrs = addrs[:3]
	budget := total / 5
	args := []string{"--peers", strings.Join(addrs, ","), "--peer-secret-file", secret,
		"--cache-mem", strconv.FormatInt(budget, 10), "--cache-disk", "0",
		"--s3-endpoint", srv.Endpoint, "--s3-path-style"}
	ms := make([]*peerMember, 3)
	for i := range ms {
		ms[i] = &peerMember{addr: addrs[i], mnt: filepath.Join(dir, "mnt"+strconv.Itoa(i)), cacheDir: filepath.Join(dir, "cache"+strconv.Itoa(i))}
		if err := os.Mkdir(ms[i].mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		extra := args
		if i == 0 {
			extra = append([]string{"--metrics-addr", metricsAddr}, args...)
		}
		ms[i].start(t, "s3://"+bucket, extra...)
	}
	for _, m := range ms {
		waitUp(t, m, 3)
	}
	phase("server, upload of 150 objects, 3 members up")

	epoch(t, ms, files, 1, 0, 1, 2)
	var cached int64
	for _, m := range ms {
		cached += m.cachedBytes(t)
	}
	if cached > 3*budget || cached < 3*budget-3*100_000 {
		t.Fatalf("group caches hold %d bytes, want within one item per member of 3 x %d", cached, budget)
	}
	before := backendBytes(t, ms)
	epoch(t, ms, files, 2, 0, 1, 2)
	got := backendBytes(t, ms) - before
	want := max(0, total-cached)
	t.Logf("dataset %d B, group caches %d B: bucket bytes in epoch 2 = %d, want %d", total, cached, got, want)
	if got != want {
		t.Errorf("bucket bytes in epoch 2 = %d, want max(0, D - sum caches) = %d exactly", got, want)
	}
	phase("epochs 1-2")

	// The group what-if knows every member's budget once the probes have
	// asked them, and predicts at most the measured bytes (the caches stop
	// short of their budgets by less than one item each).
	c, err := newControlClient(ms[0].mnt)
	if err != nil {
		t.Fatal(err)
	}
	var g groupWhatIf
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		var d groupDoc
		if err := c.getJSON(t.Context(), "/v1/stats", &d); err != nil {
			t.Fatal(err)
		}
		if g = d.Peers.Group; g.AssumedBudgets == 0 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("budgets still assumed after 10s: %+v", g)
		case <-tick.C:
		}
	}
	if g.Members != 3 || g.CacheBytes != 3*budget || g.DatasetBytes != total || g.BackendBytesPerEpoch != max(0, total-3*budget) {
		t.Errorf("group what-if %+v; want 3 members, cache %d, dataset %d", g, 3*budget, total)
	}
	if d := got - g.BackendBytesPerEpoch; d < 0 || d > 3*100_000 {
		t.Errorf("predicted %d bucket bytes per epoch, measured %d", g.BackendBytesPerEpoch, got)
	}
	code, out, stderr := stallfsCmd(t, "stats", "--files", "0", ms[0].mnt)
	if code != 0 || !strings.Contains(out, "3/3 members live") || !strings.Contains(out, "group what-if") {
		t.Errorf("stallfs stats: status %d, stderr %q, output lacks the peers section:\n%s", code, stderr, out)
	}

	// Prometheus: every peer up, labelled by its listen address.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	served := ms[0].peers(t).Served.Bytes
	metric := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		if name, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && !strings.HasPrefix(name, "#") {
			metric[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	for name, want := range map[string]float64{
		`stallfs_peer_up{peer="` + addrs[1] + `"}`: 1,
		`stallfs_peer_up{peer="` + addrs[2] + `"}`: 1,
		`stallfs_peer_unauthorized_total`:          0,
		`stallfs_peer_served_bytes_total`:          float64(served),
	} {
		if v, ok := metric[name]; !ok || v != want {
			t.Errorf("metric %s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if served == 0 {
		t.Errorf("member 0 served no bytes to the others")
	}
	phase("what-if, stats text, metrics")
}
