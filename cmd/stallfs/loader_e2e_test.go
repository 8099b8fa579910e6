package main

// End to end with a real PyTorch DataLoader (scripts/train_loader.py, run
// unchanged by Debian's /usr/bin/python3 with python3-torch and
// python3-torchvision) over a throttled stallfs mount whose cache holds 30%
// of a small JPEG dataset: every sample's checksum matches, the second
// epoch reads exactly D minus the cached bytes from the backend, and with
// epoch-order prefetch >= 99% of its misses are hidden while the backend
// serves each epoch its misses plus at most the next epoch's first
// NextEpochAhead files (epoch 1: D, not D plus the prefetcher's lead).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stallfs/stallfs/prefetch"
)

const (
	loaderFiles = 200
	loaderSeed  = 7
	// loaderSlack bounds the daemon's reads that are not backend bytes per
	// file and epoch: FUSE requests from /dev/fuse (lookup, open, read,
	// flush, release) and the control socket's requests.
	loaderSlack = 1024
	// loaderNextAhead is the prefetcher's default NextEpochAhead (its
	// default Concurrency): the files of the next epoch it may fetch
	// before the loader gets there.
	loaderNextAhead = 16
)

var genDatasetBinary struct {
	once sync.Once
	path string
	err  error
}

// torchPython returns Debian's python3 when it has torch and torchvision.
func torchPython(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	out, err := exec.Command(py, "-c", "import torch, torchvision").CombinedOutput()
	if err != nil {
		t.Fatalf("%s cannot import torch and torchvision (apt-get install python3-torch python3-torchvision): %v\n%s", py, err, out)
	}
	return py
}

// loaderDataset is a generated ImageFolder tree of real JPEGs.
type loaderDataset struct {
	root     string // the ImageFolder root (train/)
	manifest string
	files    int
	bytes    int64
}

// makeLoaderDataset writes loaderFiles small JPEGs with gen-dataset.
func makeLoaderDataset(t *testing.T) loaderDataset {
	t.Helper()
	stallfsBinary(t) // the build directory
	genDatasetBinary.once.Do(func() {
		genDatasetBinary.path = filepath.Join(testBinary.dir, "gen-dataset")
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		out, err := exec.Command(goBin, "build", "-o", genDatasetBinary.path, "../../scripts/gen-dataset").CombinedOutput()
		if err != nil {
			genDatasetBinary.err = fmt.Errorf("go build gen-dataset: %v\n%s", err, out)
		}
	})
	if genDatasetBinary.err != nil {
		t.Fatal(genDatasetBinary.err)
	}
	dir := t.TempDir()
	ds := loaderDataset{root: filepath.Join(dir, "src", "train"), manifest: filepath.Join(dir, "manifest.tsv")}
	out, err := exec.Command(genDatasetBinary.path, "-out", filepath.Join(dir, "src"), "-jpeg", "-classes", "8",
		"-files", strconv.Itoa(loaderFiles), "-mean", "8KiB", "-min", "4KiB", "-max", "24KiB", "-seed", "3",
		"-manifest", ds.manifest, "-workers", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("gen-dataset: %v\n%s", err, out)
	}
	b, err := os.ReadFile(ds.manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(line, "\t")
		n, err := strconv.ParseInt(f[1], 10, 64)
		if len(f) != 3 || err != nil {
			t.Fatalf("manifest line %q", line)
		}
		ds.files++
		ds.bytes += n
	}
	if ds.files != loaderFiles {
		t.Fatalf("manifest has %d files, want %d", ds.files, loaderFiles)
	}
	return ds
}

// loaderEpoch is one JSON line of train_loader.py --json.
type loaderEpoch struct {
	Epoch        int     `json:"epoch"`
	Images       int     `json:"images"`
	Seconds      float64 `json:"seconds"`
	StallSeconds float64 `json:"stall_seconds"`
	Verified     int     `json:"verified"`
}

// loaderSnap is the daemon's state after one epoch, once it is quiet.
type loaderSnap struct {
	rchar   int64
	backend int64 // stallfs_throttle_read_bytes_total: every backend byte
	st      mountStats
}

// loaderRun is the result of one train_loader.py run over a mount.
type loaderRun struct {
	epochs []loaderEpoch
	snaps  []loaderSnap // one per epoch
	cached int64        // bytes in the memory tier at the end
	items  int64        // items in the memory tier at the end
}

// quietSnap waits until the daemon stopped reading (the prefetcher has no
// fetch in flight and rchar and the backend's bytes hold still over a few
// polls), then returns its rchar, backend bytes (from the metrics at
// metrics) and stats.
func quietSnap(t *testing.T, ctx context.Context, c *controlClient, pid int, metrics string) loaderSnap {
	t.Helper()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	var last loaderSnap
	same := 0
	for {
		var s loaderSnap
		if err := c.getJSON(ctx, "/v1/stats", &s.st); err != nil {
			t.Fatal(err)
		}
		s.rchar = procRchar(t, pid)
		s.backend = int64(scrape(t, metrics)["stallfs_throttle_read_bytes_total"])
		idle := s.st.Prefetcher == nil || s.st.Prefetcher.InFlight == 0
		// The stats request itself adds to rchar; compare fetched bytes
		// and rchar within a request's worth.
		if idle && s.st.Prefetch.FetchedBytes == last.st.Prefetch.FetchedBytes && s.backend == last.backend && s.rchar-last.rchar < 4096 {
			if same++; same >= 3 {
				return s
			}
		} else {
			same = 0
		}
		last = s
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the daemon did not go quiet within 20s (rchar %d, prefetch %+v)", s.rchar, s.st.Prefetch)
		}
	}
}

// runLoader mounts ds with the throttled backend and a cache of 30% of
// it, runs train_loader.py for epochs epochs and snapshots the daemon
// after each epoch (through the script's --epoch-hook and two FIFOs).
func runLoader(t *testing.T, py string, ds loaderDataset, epochs int, prefetch bool) loaderRun {
	t.Helper()
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if isMounted(mnt) {
			_ = unmountPath(mnt, true)
		}
	})
	metrics := freePort(t)
	args := []string{"--cache-mem", strconv.FormatInt(ds.bytes*3/10, 10),
		"--backend-latency", "10ms", "--backend-bandwidth", "50MB/s", "--metrics-addr", metrics}
	if prefetch {
		args = append(args, "--order", "torch-distributed", "--seed", strconv.Itoa(loaderSeed),
			"--world-size", "1", "--rank", "0", "--layout", "imagefolder",
			// Less than an epoch ahead (the loader's reorder window is
			// 2 workers x 2 batches of 8), so the prefetcher has to keep
			// pace during the epoch rather than fetch it all between.
			"--prefetch-ahead", "64")
	}
	p := startForeground(t, ds.root, mnt, args...)
	pid := p.cmd.Process.Pid
	c, err := newControlClient(mnt)
	if err != nil {
		t.Fatal(err)
	}
	var run loaderRun
	ctx := t.Context()
	req, ack := filepath.Join(dir, "req"), filepath.Join(dir, "ack")
	for _, f := range []string{req, ack} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hook := fmt.Sprintf("echo $STALLFS_EPOCH > %s && read x < %s", req, ack)
	cmd := exec.Command(py, "../../scripts/train_loader.py", mnt, "--manifest", ds.manifest,
		"--epochs", strconv.Itoa(epochs), "--workers", "2", "--batch-size", "8", "--crop", "64",
		"--sampler", "distributed", "--seed", strconv.Itoa(loaderSeed), "--world-size", "1", "--rank", "0",
		"--json", "--epoch-hook", hook)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- cmd.Wait()
		// Unblock the FIFO loop below if the loader ended early.
		if f, err := os.OpenFile(req, os.O_WRONLY, 0); err == nil {
			fmt.Fprintln(f, "done")
			f.Close()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	for {
		f, err := os.Open(req)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		if strings.TrimSpace(line) == "done" || line == "" {
			break
		}
		run.snaps = append(run.snaps, quietSnap(t, ctx, c, pid, metrics))
		a, err := os.OpenFile(ack, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(a)
		a.Close()
	}
	if err := <-done; err != nil {
		t.Fatalf("train_loader.py: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var e loaderEpoch
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("train_loader.py output %q: %v", line, err)
		}
		run.epochs = append(run.epochs, e)
	}
	for _, tier := range run.snaps[len(run.snaps)-1].st.Cache.Tiers {
		if tier.Tier == "memory" {
			run.cached, run.items = tier.UsedBytes, tier.Items
		}
	}
	return run
}

// checkLoaderRun asserts what both runs share: every sample verified, the
// cache full to its budget and never more, and the second epoch's backend
// bytes exactly D minus the cached bytes in the stats.
func checkLoaderRun(t *testing.T, ds loaderDataset, run loaderRun, epochs int) {
	t.Helper()
	if len(run.epochs) != epochs || len(run.snaps) != epochs {
		t.Fatalf("got %d epoch rows and %d snapshots, want %d", len(run.epochs), len(run.snaps), epochs)
	}
	for _, e := range run.epochs {
		if e.Images != ds.files || e.Verified != ds.files {
			t.Errorf("epoch %d: %d images, %d checksums verified, want %d", e.Epoch, e.Images, e.Verified, ds.files)
		}
	}
	if budget := ds.bytes * 3 / 10; run.cached <= budget*8/10 || run.cached > budget {
		t.Errorf("memory tier holds %d bytes, want most of the budget %d", run.cached, budget)
	}
	rows := run.snaps[len(run.snaps)-1].st.Epochs
	if len(rows) < 2 {
		t.Fatalf("stats have %d epoch rows, want >= 2", len(rows))
	}
	for i, r := range rows[1:] {
		if r.Bytes != ds.bytes || r.BytesBySource.Backend != ds.bytes-run.cached || r.BytesBySource.Memory != run.cached {
			t.Errorf("stats epoch %d: read %d bytes, %d from the backend, %d from memory; want %d, D-C = %d, C = %d",
				i+2, r.Bytes, r.BytesBySource.Backend, r.BytesBySource.Memory, ds.bytes, ds.bytes-run.cached, run.cached)
		}
	}
}

// backendBytes returns the backend's bytes during each epoch, between
// the quiet points around it; epoch 1's from the mount on (the prefetcher
// starts on the first epoch before the loader does).
func (r loaderRun) backendBytes() []int64 {
	out := make([]int64, len(r.snaps))
	var prev int64
	for i, s := range r.snaps {
		out[i], prev = s.backend-prev, s.backend
	}
	return out
}

// epochHeadBytes returns the bytes of the first k files that the loader's
// DistributedSampler (seed loaderSeed, one rank) reads in epoch e
// (0-based) over ds's ImageFolder: what the prefetcher may fetch for
// epoch e before the loader is in it.
func epochHeadBytes(t *testing.T, ds loaderDataset, e, k int) int64 {
	t.Helper()
	l, err := prefetch.ImageFolder(os.DirFS(ds.root), prefetch.ImageFolderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o, err := prefetch.NewTorchDistributed(l.Len(), prefetch.DistributedOptions{Seed: loaderSeed, WorldSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := o.Epoch(e)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, x := range idx[:k] {
		fi, err := os.Stat(filepath.Join(ds.root, l.Path(x)))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func TestE2ETorchLoaderPrefetch(t *testing.T) {
	py := torchPython(t)
	ds := makeLoaderDataset(t)
	const epochs = 2
	var stall [2]float64 // epoch 2 fetch stall without and with prefetch
	t.Run("prefetch", func(t *testing.T) {
		run := runLoader(t, py, ds, epochs, true)
		checkLoaderRun(t, ds, run, epochs)
		s1, s2 := run.snaps[0], run.snaps[1]
		pf := s2.st.Prefetcher
		if pf == nil || len(pf.Readers) != 1 {
			t.Fatalf("stats have no prefetcher reader: %+v", pf)
		}
		// The prefetcher's second epoch: every miss fetched once, ahead.
		misses := int64(ds.files) - run.items
		var found bool
		for _, e := range pf.Readers[0].Epochs {
			if e.Epoch != 1 {
				continue
			}
			found = true
			notHidden := e.Late + e.NotIssued
			t.Logf("prefetcher epoch 2: %+v", e)
			if e.Fetched != misses || e.Hidden+notHidden != misses {
				t.Errorf("prefetcher epoch 2: fetched %d, hidden %d, not hidden %d; want %d misses", e.Fetched, e.Hidden, notHidden, misses)
			}
			if float64(e.Hidden) < 0.99*float64(misses) {
				t.Errorf("prefetcher epoch 2 hid %d of %d misses, want >= 99%%", e.Hidden, misses)
			}
			if e.MatchRate < 0.99 {
				t.Errorf("prefetcher epoch 2 match rate %.3f", e.MatchRate)
			}
		}
		if !found {
			t.Fatalf("no prefetcher row for epoch 2: %+v", pf.Readers[0].Epochs)
		}
		hidden := s2.st.Prefetch.HiddenMisses - s1.st.Prefetch.HiddenMisses
		notHidden := s2.st.Prefetch.NotHiddenMisses - s1.st.Prefetch.NotHiddenMisses
		if float64(hidden) < 0.99*float64(hidden+notHidden) || hidden < misses*9/10 {
			t.Errorf("stats prefetch section: %d hidden, %d not hidden during epoch 2", hidden, notHidden)
		}
		// Independently, the daemon's read calls: what the prefetcher
		// fetched between the two quiet points, plus FUSE requests.
		got := s2.rchar - s1.rchar
		fetched := s2.st.Prefetch.FetchedBytes - s1.st.Prefetch.FetchedBytes
		t.Logf("epoch 2: rchar %d, prefetched %d bytes, D-C %d", got, fetched, ds.bytes-run.cached)
		if got < fetched || got > fetched+int64(ds.files)*loaderSlack {
			t.Errorf("daemon rchar grew %d bytes in epoch 2, the prefetcher fetched %d (+ at most %d of requests)", got, fetched, ds.files*loaderSlack)
		}
		stall[1] = s2.st.Epochs[1].FetchStallSeconds
		// The backend, counted below the read path: epoch 1 reads D and
		// at most the head of epoch 2 (not the prefetcher's whole lead
		// of 64 files); epoch 2 reads D-C, less what epoch 1 fetched for
		// it, plus at most the head of epoch 3.
		b := run.backendBytes()
		head2, head3 := epochHeadBytes(t, ds, 1, loaderNextAhead), epochHeadBytes(t, ds, 2, loaderNextAhead)
		t.Logf("backend bytes: epoch 1 %d (D %d, head of epoch 2 %d), epoch 2 %d (D-C %d, head of epoch 3 %d)",
			b[0], ds.bytes, head2, b[1], ds.bytes-run.cached, head3)
		if b[0] < ds.bytes || b[0] > ds.bytes+head2 {
			t.Errorf("epoch 1 with prefetch: the backend served %d bytes, want D = %d plus at most the %d bytes of epoch 2's first %d files",
				b[0], ds.bytes, head2, loaderNextAhead)
		}
		if want := ds.bytes - run.cached; b[1] < want-head2 || b[1] > want+head3 {
			t.Errorf("epoch 2 with prefetch: the backend served %d bytes, want D-C = %d within -%d/+%d (the epoch heads)", b[1], want, head2, head3)
		}
	})
	t.Run("no-prefetch", func(t *testing.T) {
		run := runLoader(t, py, ds, epochs, false)
		checkLoaderRun(t, ds, run, epochs)
		// Without prefetch the epoch's backend reads are the misses, read
		// on demand: rchar grows by exactly D-C plus the FUSE requests.
		got := run.snaps[1].rchar - run.snaps[0].rchar
		want := ds.bytes - run.cached
		t.Logf("epoch 2: rchar %d, D-C %d", got, want)
		if got < want || got > want+int64(ds.files)*loaderSlack {
			t.Errorf("daemon rchar grew %d bytes in epoch 2, want D-C = %d (+ at most %d of requests)", got, want, ds.files*loaderSlack)
		}
		stall[0] = run.snaps[1].st.Epochs[1].FetchStallSeconds
		if b := run.backendBytes(); b[0] != ds.bytes || b[1] != ds.bytes-run.cached {
			t.Errorf("backend bytes per epoch %v, want D = %d then D-C = %d", b, ds.bytes, ds.bytes-run.cached)
		}
		if stall[0] <= 0 {
			t.Errorf("epoch 2 without prefetch: no fetch stall")
		}
	})
	t.Logf("epoch 2 fetch stall (stats, summed over reads): %.3fs without prefetch, %.3fs with", stall[0], stall[1])
	if !t.Failed() && stall[1] > stall[0]/4 {
		t.Errorf("epoch 2 fetch stall with prefetch %.3fs, without %.3fs: want far less with", stall[1], stall[0])
	}
}
