package main

// End-to-end test of the stall accounting through the binary: a throttled
// backend, a MinIO memory tier of ~40% of the dataset, explicit epochs
// through the control socket, `stallfs stats --json` against an
// independent count of the backend's bytes (the throttle's counter and the
// daemon's /proc/PID/io), and the /metrics scrape against the JSON.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stallfs/stallfs/stats"
)

// statsFile is one file of the stats test's dataset.
type statsFile struct {
	path string
	size int
	part int    // read with this buffer; 0: os.ReadFile (one FUSE read)
	want []byte // its content, computed once: readers check at memory speed
}

// statsDataset writes 150 files: 147 class images of 2-122 KB, a label
// file, a 1.5 MiB file (one item, read in 64 KiB parts) and a 5 MiB shard
// (two items, read in 256 KiB parts with readahead). It returns them and
// their total size.
func statsDataset(t *testing.T, root string) ([]statsFile, int64) {
	t.Helper()
	var files []statsFile
	for i := range 147 {
		files = append(files, statsFile{path: fmt.Sprintf("train/c%d/%03d.JPEG", i%5, i), size: 2000 + i*7919%120000})
	}
	files = append(files,
		statsFile{path: "labels.txt", size: 1500},
		statsFile{path: "big/one-item.bin", size: 3 << 19, part: 64 << 10},
		statsFile{path: "big/shard-000.tar", size: 5<<20 + 123, part: 256 << 10},
	)
	var d int64
	for i := range files {
		f := &files[i]
		f.want = pattern(f.path, f.size)
		writeTestFile(t, root, f.path, f.want)
		d += int64(f.size)
	}
	return files, d
}

// readStatsFile reads f through the mount and checks every byte.
func readStatsFile(mnt string, f statsFile) error {
	full := filepath.Join(mnt, filepath.FromSlash(f.path))
	var got []byte
	if f.part == 0 {
		b, err := os.ReadFile(full)
		if err != nil {
			return err
		}
		got = b
	} else {
		h, err := os.Open(full)
		if err != nil {
			return err
		}
		defer h.Close()
		var out bytes.Buffer
		if _, err := io.CopyBuffer(&out, struct{ io.Reader }{h}, make([]byte, f.part)); err != nil {
			return fmt.Errorf("read %s: %w", f.path, err)
		}
		got = out.Bytes()
	}
	if !bytes.Equal(got, f.want) {
		return fmt.Errorf("%s: %d bytes read differ from the source's %d", f.path, len(got), f.size)
	}
	return nil
}

// readAll reads files with workers goroutines, each file once, in a
// shuffled order (seeded by seed), and fails the test on any error.
func readAll(t *testing.T, mnt string, files []statsFile, workers int, seed uint64) {
	t.Helper()
	order := slices.Clone(files)
	x := seed*2654435761 + 1
	for i := len(order) - 1; i > 0; i-- {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		j := int(x % uint64(i+1))
		order[i], order[j] = order[j], order[i]
	}
	work := make(chan statsFile)
	errs := make(chan error, len(order))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for f := range work {
				errs <- readStatsFile(mnt, f)
			}
		})
	}
	for _, f := range order {
		work <- f
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// postEpoch announces epoch n on the mount's control socket.
func postEpoch(t *testing.T, mnt string, n int) {
	t.Helper()
	c, err := newControlClient(mnt)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.http.Post("http://stallfs/v1/epoch", "application/json", strings.NewReader(fmt.Sprintf(`{"epoch":%d}`, n)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST /v1/epoch %d: %s %s", n, resp.Status, b)
	}
}

// statsJSON runs `stallfs stats --json` and decodes its document.
func statsJSON(t *testing.T, mnt string, files int) stats.Snapshot {
	t.Helper()
	code, stdout, stderr := stallfsCmd(t, "stats", "--json", "--files", strconv.Itoa(files), mnt)
	if code != 0 {
		t.Fatalf("stallfs stats --json: exit %d: %s", code, stderr)
	}
	var s stats.Snapshot
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("stallfs stats --json: %v\n%s", err, stdout)
	}
	return s
}

// scrape reads the Prometheus text exposition at addr into "name{labels}"
// -> value (histogram series included).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func bySourceSum(b stats.BySource) int64 { return b.Memory + b.Disk + b.Peer + b.Backend }

func TestE2EStatsTwoEpochsThrottled(t *testing.T) {
	dir := t.TempDir()
	src, mnt := filepath.Join(dir, "src"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	files, d := statsDataset(t, src)
	budget := d * 4 / 10
	addr := freePort(t)
	p := startForeground(t, src, mnt, "--cache-mem", strconv.FormatInt(budget, 10),
		"--backend-latency", "20ms", "--backend-bandwidth", "50MB/s", "--metrics-addr", addr)
	t.Cleanup(func() {
		if isMounted(mnt) {
			_ = unmountPath(mnt, true)
		}
	})
	pid := p.cmd.Process.Pid

	// The mount root lists exactly the source's entries: no control entry.
	want, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	names := func(es []os.DirEntry) (s []string) {
		for _, e := range es {
			s = append(s, e.Name())
		}
		return s
	}
	if !slices.Equal(names(got), names(want)) {
		t.Errorf("mount root lists %q, source %q", names(got), names(want))
	}

	rchar0 := procRchar(t, pid)
	postEpoch(t, mnt, 1)
	t1 := time.Now()
	readAll(t, mnt, files, 8, 1)
	t.Logf("epoch 1: %v", time.Since(t1))
	postEpoch(t, mnt, 2)
	t2 := time.Now()
	readAll(t, mnt, files, 8, 2)
	t.Logf("epoch 2: %v", time.Since(t2))
	postEpoch(t, mnt, 3)
	rchar := procRchar(t, pid) - rchar0

	s := statsJSON(t, mnt, len(files))
	m := scrape(t, addr)
	if len(s.Epochs) != 2 {
		t.Fatalf("stats has %d epoch rows, want 2: %+v", len(s.Epochs), s.Epochs)
	}
	e1, e2 := s.Epochs[0], s.Epochs[1]
	var memUsed int64
	for _, tf := range s.Cache.Tiers {
		if tf.Tier == "memory" {
			memUsed = tf.UsedBytes
		}
	}
	t.Logf("D=%d budget=%d memory used=%d", d, budget, memUsed)
	t.Logf("epoch 1: %.3fs stall %.3fs (share %.2f) bytes %+v hit %.3f optimal %.3f",
		e1.Seconds, e1.FetchStallSeconds, e1.StallShare, e1.BytesBySource, e1.HitRate, e1.OptimalHitRate)
	t.Logf("epoch 2: %.3fs stall %.3fs (share %.2f) bytes %+v hit %.3f optimal %.3f",
		e2.Seconds, e2.FetchStallSeconds, e2.StallShare, e2.BytesBySource, e2.HitRate, e2.OptimalHitRate)

	for i, e := range s.Epochs {
		if e.Epoch != int64(i+1) || !e.Complete || e.EndReason != "explicit" {
			t.Errorf("epoch row %d: epoch %d complete %v reason %q, want %d, true, explicit", i, e.Epoch, e.Complete, e.EndReason, i+1)
		}
		if e.Bytes != d || bySourceSum(e.BytesBySource) != d || e.Files != int64(len(files)) {
			t.Errorf("epoch %d: %d bytes (by source %d) of %d files, want %d of %d", e.Epoch, e.Bytes, bySourceSum(e.BytesBySource), e.Files, d, len(files))
		}
	}
	if memUsed < budget*3/4 || memUsed > budget {
		t.Errorf("memory tier holds %d bytes, want most of its %d budget", memUsed, budget)
	}
	// Epoch 1: everything from the backend, every read stalled. The
	// share of wall time is well above 0.5 on a quiet machine; a loaded
	// one stretches the readers' own time (measured 0.19 once), so the
	// bound only says the stall is a real part of the epoch.
	if e1.BytesBySource.Backend != d || e1.FetchStallSeconds <= 0 || e1.StallShare < 0.1 {
		t.Errorf("epoch 1: backend %d of %d, stall %.3fs share %.2f; want all from the backend, stalled", e1.BytesBySource.Backend, d, e1.FetchStallSeconds, e1.StallShare)
	}
	// Epoch 2: the MinIO cache serves exactly what it holds, the backend
	// the rest, and the stall shrinks with the hits.
	if e2.BytesBySource.Memory != memUsed || e2.BytesBySource.Backend != d-memUsed {
		t.Errorf("epoch 2: memory %d backend %d, want %d and D-cached %d", e2.BytesBySource.Memory, e2.BytesBySource.Backend, memUsed, d-memUsed)
	}
	if r := e2.FetchStallSeconds / e1.FetchStallSeconds; !(r < 0.8) {
		t.Errorf("stall epoch 2 / epoch 1 = %.3f / %.3f = %.2f, want < 0.8", e2.FetchStallSeconds, e1.FetchStallSeconds, r)
	}
	if e2.HitRate <= 0.3 || math.Abs(e2.HitRate-e2.OptimalHitRate) > 0.05 {
		t.Errorf("epoch 2 hit rate %.3f, MinIO optimum %.3f; want them close", e2.HitRate, e2.OptimalHitRate)
	}

	// Totals: the sources add up, and the backend's share is what the
	// backend served, counted independently below the read path.
	thr := int64(m["stallfs_throttle_read_bytes_total"])
	checkTotals(t, s, thr)
	if s.Totals.Bytes != 2*d || s.Totals.BytesBySource.Backend != e1.BytesBySource.Backend+e2.BytesBySource.Backend {
		t.Errorf("totals: %d bytes, backend %d; want %d and the epochs' sum", s.Totals.Bytes, s.Totals.BytesBySource.Backend, 2*d)
	}
	// The daemon's read(2) bytes: the backend's plus FUSE requests and
	// control-socket traffic (a few hundred bytes per request).
	t.Logf("rchar delta %d, backend %d: %d bytes of other reads", rchar, thr, rchar-thr)
	if rchar < thr || rchar-thr > 1<<20 {
		t.Errorf("daemon read %d bytes (rchar) for %d backend bytes; want backend <= rchar <= backend+1MiB", rchar, thr)
	}
	checkMetrics(t, s, m, memUsed)

	// Two readers of the same uncached files at once (two jobs on one
	// mount): one backend read per item, the second reader's bytes a hit
	// of the shared fill, so the JSON still equals the backend's count.
	if len(s.Files) != len(files) {
		t.Fatalf("stats --files %d: %d file rows", len(files), len(s.Files))
	}
	lastSource := map[string]string{}
	for _, f := range s.Files {
		lastSource[f.Path] = f.Source
	}
	var small []statsFile
	var smallBytes, uncached int64
	for _, f := range files {
		if f.size < 120_000 {
			small = append(small, f)
			smallBytes += int64(f.size)
			if lastSource[f.path] == "backend" {
				uncached += int64(f.size)
			}
		}
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 2*len(small))
	for range 2 {
		wg.Go(func() {
			<-start
			for _, f := range small {
				errs <- readStatsFile(mnt, f)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	postEpoch(t, mnt, 4)
	s = statsJSON(t, mnt, 3)
	m = scrape(t, addr)
	thr3 := int64(m["stallfs_throttle_read_bytes_total"])
	e3 := s.Epochs[2]
	t.Logf("epoch 3 (two readers): %.3fs stall %.3fs bytes %+v, backend served %d for %d uncached bytes per reader",
		e3.Seconds, e3.FetchStallSeconds, e3.BytesBySource, thr3-thr, uncached)
	if e3.Bytes != 2*smallBytes || bySourceSum(e3.BytesBySource) != 2*smallBytes {
		t.Errorf("epoch 3: %d bytes (by source %d), want %d", e3.Bytes, bySourceSum(e3.BytesBySource), 2*smallBytes)
	}
	if e3.BytesBySource.Backend != thr3-thr {
		t.Errorf("epoch 3: backend %d bytes in the JSON, the backend served %d", e3.BytesBySource.Backend, thr3-thr)
	}
	// Nothing new was cached (the tier is full), so each reader missed the
	// bytes that epoch 2 read from the backend; shared fills must have
	// saved some of the second reader's.
	if thr3-thr < uncached || thr3-thr >= 2*uncached {
		t.Errorf("epoch 3: the backend served %d bytes for 2 readers of %d uncached bytes; want shared fills", thr3-thr, uncached)
	}
	checkTotals(t, s, thr3)
	checkMetrics(t, s, m, memUsed)

	// Text summary, and a path that is no stallfs mount.
	code, stdout, stderr := stallfsCmd(t, "stats", "--files", "3", mnt)
	if code != 0 || !strings.Contains(stdout, "big/shard-000.tar") && !strings.Contains(stdout, "train/") {
		t.Errorf("stallfs stats: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	for path, msg := range map[string]string{src: "is not a stallfs mount", filepath.Join(dir, "missing"): "no such file"} {
		code, _, stderr = stallfsCmd(t, "stats", path)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, msg) {
			t.Errorf("stallfs stats %s: exit %d, stderr %q; want 2 and one line saying %q", path, code, stderr, msg)
		}
	}
}

// checkTotals checks that the totals add up and that their backend bytes
// equal thr, the bytes the throttled backend served.
func checkTotals(t *testing.T, s stats.Snapshot, thr int64) {
	t.Helper()
	tot := s.Totals
	if bySourceSum(tot.BytesBySource) != tot.Bytes || bySourceSum(tot.ReadsBySource) != tot.Reads {
		t.Errorf("totals: bytes %d, by source %+v; reads %d, by source %+v", tot.Bytes, tot.BytesBySource, tot.Reads, tot.ReadsBySource)
	}
	if thr <= 0 || tot.BytesBySource.Backend != thr {
		t.Errorf("totals.bytes_by_source.backend = %d, the throttled backend served %d", tot.BytesBySource.Backend, thr)
	}
	var rows int64
	for _, e := range s.Epochs {
		rows += e.Bytes
	}
	if rows != tot.Bytes {
		t.Errorf("epoch rows sum to %d bytes, totals %d", rows, tot.Bytes)
	}
}

// checkMetrics compares the /metrics scrape m with the JSON s, taken with
// no reads in between.
func checkMetrics(t *testing.T, s stats.Snapshot, m map[string]float64, memUsed int64) {
	t.Helper()
	for src, v := range map[string]int64{"memory": s.Totals.BytesBySource.Memory, "disk": s.Totals.BytesBySource.Disk,
		"peer": s.Totals.BytesBySource.Peer, "backend": s.Totals.BytesBySource.Backend} {
		if got := m[`stallfs_read_bytes_total{source="`+src+`"}`]; got != float64(v) {
			t.Errorf("stallfs_read_bytes_total{source=%q} = %v, JSON %d", src, got, v)
		}
	}
	if got := m[`stallfs_reads_total{source="backend"}`]; got != float64(s.Totals.ReadsBySource.Backend) {
		t.Errorf("stallfs_reads_total{source=backend} = %v, JSON %d", got, s.Totals.ReadsBySource.Backend)
	}
	if got, want := m["stallfs_fetch_stall_seconds_total"], s.Totals.FetchStallSeconds; want <= 0 || math.Abs(got-want) > 1e-6*want {
		t.Errorf("stallfs_fetch_stall_seconds_total = %v, JSON %v", got, want)
	}
	if got := m["stallfs_read_latency_seconds_count"]; got != float64(s.Totals.Reads) {
		t.Errorf("stallfs_read_latency_seconds_count = %v, JSON reads %d", got, s.Totals.Reads)
	}
	if got := m["stallfs_epoch"]; got != float64(s.Epoch) {
		t.Errorf("stallfs_epoch = %v, JSON %d", got, s.Epoch)
	}
	if got := m[`stallfs_cache_used_bytes{tier="memory"}`]; got != float64(memUsed) {
		t.Errorf("stallfs_cache_used_bytes{tier=memory} = %v, JSON %d", got, memUsed)
	}
	for k := range m {
		if strings.Contains(k, "path=") || strings.Contains(k, "train/") {
			t.Errorf("metric %s has a file path as a label", k)
		}
	}
}
