package main

// Validation of `stallfs simulate` against real mounts: one mount alone
// and three mounts as a peer group over one throttled local source; the
// backend bytes per epoch must match the model within 5%.

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stallfs/stallfs/stats"
)

// simMeasured is one mount's counters from `stallfs stats --json`.
type simMeasured struct {
	Totals struct {
		BytesBySource struct {
			Backend int64 `json:"backend"`
		} `json:"bytes_by_source"`
		StallWallSeconds float64 `json:"stall_wall_seconds"`
	} `json:"totals"`
	Peers *struct {
		Fills struct {
			BackendBytes int64 `json:"backend_bytes"`
		} `json:"fills"`
	} `json:"peers"`
}

// backend is the mount's backend traffic: its fills when it is in a
// group (for its readers and for peers), else its readers' backend bytes.
func (s simMeasured) backend() int64 {
	if s.Peers != nil {
		return s.Peers.Fills.BackendBytes
	}
	return s.Totals.BytesBySource.Backend
}

func simStats(t *testing.T, mnt string) simMeasured {
	t.Helper()
	code, out, errOut := stallfsCmd(t, "stats", "--json", "--files", "0", mnt)
	if code != 0 {
		t.Fatalf("stallfs stats --json %s: exit %d: %s", mnt, code, errOut)
	}
	var s simMeasured
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("stats of %s: %v", mnt, err)
	}
	return s
}

// simPredict runs `stallfs simulate --json ARGS` and returns the system's
// epochs.
func simPredict(t *testing.T, system string, args ...string) []stats.ClusterEpoch {
	t.Helper()
	code, out, errOut := stallfsCmd(t, append([]string{"simulate", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("stallfs simulate %v: exit %d: %s", args, code, errOut)
	}
	var r stats.ClusterResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for _, s := range r.Systems {
		if s.System == system {
			return s.Epochs
		}
	}
	t.Fatalf("no %s in %s", system, out)
	return nil
}

// TestE2ESimulateValidation mounts a 150-file dataset (9 MB) with a
// throttled backend (8 MB/s, 2 ms per request, per mount), reads 3 epochs
// in fresh permutations with 4 readers per mount, and compares each
// epoch's backend bytes (the cluster's) and fetch stall (per node: wall
// time with a reader waiting, averaged over the mounts) with
// `stallfs simulate` for the same inputs: one mount with a cache of D/2
// reading everything (system minio), then three peers with D/5 each
// reading DistributedSampler shards (minio_peers). Bytes must be within
// 5%; stall is logged (this shared machine's load decides it).
func TestE2ESimulateValidation(t *testing.T) {
	stallfsBinary(t)
	const bw, latency, readers, epochs = 8_000_000, "2ms", 4, 3
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	files, total := peerDataset(t, src, 150)
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("simulate-validation-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	throttle := []string{"--backend-bandwidth", strconv.Itoa(bw), "--backend-latency", latency, "--cache-disk", "0"}

	for _, tc := range []struct {
		name   string
		nodes  int
		cache  int64
		system string
	}{
		{"one mount, cache D/2, whole dataset per epoch", 1, total / 2, stats.SystemMinIO},
		{"three peers, cache D/5 each, DistributedSampler", 3, total / 5, stats.SystemMinIOPeers},
	} {
		t.Run(fmt.Sprintf("%d", tc.nodes), func(t *testing.T) {
			ms := make([]*peerMember, tc.nodes)
			args := append([]string{"--cache-mem", strconv.FormatInt(tc.cache, 10)}, throttle...)
			var addrs []string
			if tc.nodes > 1 {
				addrs = freePorts(t, tc.nodes)
				args = append(args, "--peers", strings.Join(addrs, ","), "--peer-secret-file", secret)
			}
			for i := range ms {
				ms[i] = &peerMember{mnt: filepath.Join(dir, fmt.Sprintf("mnt%d.%d", tc.nodes, i)),
					cacheDir: filepath.Join(dir, fmt.Sprintf("cache%d.%d", tc.nodes, i))}
				if err := os.Mkdir(ms[i].mnt, 0o755); err != nil {
					t.Fatal(err)
				}
				if tc.nodes > 1 {
					ms[i].addr = addrs[i]
					ms[i].start(t, src, args...)
					continue
				}
				t.Cleanup(func() {
					if isMounted(ms[i].mnt) {
						_ = unmountPath(ms[i].mnt, true)
					}
				})
				ms[i].proc = startForeground(t, src, ms[i].mnt, append([]string{"--cache-dir", ms[i].cacheDir}, args...)...)
			}
			if tc.nodes > 1 {
				for _, m := range ms {
					waitUp(t, m, tc.nodes)
				}
			}
			simArgs := []string{"--dataset", strconv.FormatInt(total, 10), "--files", strconv.Itoa(len(files)),
				"--cache", strconv.FormatInt(tc.cache, 10), "--nodes", strconv.Itoa(tc.nodes),
				"--backend-bandwidth", strconv.Itoa(bw * tc.nodes), "--backend-latency", latency,
				"--concurrency", strconv.Itoa(readers), "--epochs", strconv.Itoa(epochs)}
			if tc.nodes > 1 {
				simArgs = append(simArgs, "--distributed")
			}
			want := simPredict(t, tc.system, simArgs...)

			prev := make([]simMeasured, len(ms))
			for i, m := range ms {
				prev[i] = simStats(t, m.mnt)
			}
			for e := 1; e <= epochs; e++ {
				epoch(t, ms, files, e, rangeInts(len(ms))...)
				var bytes int64
				var stall float64
				for i, m := range ms {
					s := simStats(t, m.mnt)
					bytes += s.backend() - prev[i].backend()
					stall += s.Totals.StallWallSeconds - prev[i].Totals.StallWallSeconds
					prev[i] = s
				}
				stall /= float64(len(ms))
				w := want[e-1]
				t.Logf("%s, epoch %d: backend %d B, model %d B (%+.2f%%); stall per node %.3f s, model %.3f s (%+.1f%%)",
					tc.name, e, bytes, w.BackendBytesTotal, pctOff(float64(bytes), float64(w.BackendBytesTotal)),
					stall, w.StallSeconds, pctOff(stall, w.StallSeconds))
				if d := math.Abs(float64(bytes - w.BackendBytesTotal)); d > 0.05*float64(w.BackendBytesTotal) {
					t.Errorf("%s, epoch %d: backend bytes %d, model %d: more than 5%% apart", tc.name, e, bytes, w.BackendBytesTotal)
				}
			}
		})
	}
}

// rangeInts is 0..n-1.
func rangeInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// pctOff is how far got is from want, in percent of want.
func pctOff(got, want float64) float64 {
	if want == 0 {
		return 0
	}
	return 100 * (got - want) / want
}
