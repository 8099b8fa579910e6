package stats

import (
	"errors"
	"math"
	"testing"
)

// clusterBytes returns one system's total backend bytes per epoch.
func clusterBytes(t *testing.T, in ClusterInput, system string) []int64 {
	t.Helper()
	res, err := Cluster(in)
	if err != nil {
		t.Fatalf("Cluster(%+v): %v", in, err)
	}
	for _, s := range res.Systems {
		if s.System == system {
			var out []int64
			for _, e := range s.Epochs {
				out = append(out, e.BackendBytesTotal)
			}
			return out
		}
	}
	t.Fatalf("no system %q in %+v", system, res)
	return nil
}

func TestClusterBackendBytes(t *testing.T) {
	const d = 1 << 30 // D; files of 1 MiB
	base := ClusterInput{DatasetBytes: d, Files: 1024, BackendRate: 1e9, Epochs: 4}
	with := func(c int64, m int, dist bool) ClusterInput {
		in := base
		in.CacheBytes, in.Nodes, in.Distributed = c, m, dist
		return in
	}
	tests := []struct {
		name   string
		in     ClusterInput
		system string
		want   []int64
	}{
		{"one node, a quarter cached", with(d/4, 1, false), SystemMinIO, []int64{d, d * 3 / 4, d * 3 / 4, d * 3 / 4}},
		{"whole dataset on 4 nodes", with(d/4, 4, false), SystemMinIO, []int64{4 * d, 3 * d, 3 * d, 3 * d}},
		{"cache larger than the dataset", with(2*d, 2, false), SystemMinIO, []int64{2 * d, 0, 0, 0}},
		// Distributed, C = D/8 < D/M: a node's cache fills in epoch 1 and
		// then hits C/D of its fresh D/4.
		{"distributed, C < D/M", with(d/8, 4, true), SystemMinIO, []int64{d, d * 7 / 8, d * 7 / 8, d * 7 / 8}},
		// Distributed, C = D/2 > D/M = D/4: the cache grows by the misses,
		// c1 = D/4, c2 = D/4 + 3D/16 = 7D/16, c3 = min(D/2, ...) = D/2.
		{"distributed, C > D/M", with(d/2, 4, true), SystemMinIO, []int64{d, d * 3 / 4, d * 9 / 16, d / 2}},
		{"peers, distributed", with(d/5, 3, true), SystemMinIOPeers, []int64{d, d - 3*(d/5), d - 3*(d/5), d - 3*(d/5)}},
		{"peers hold everything", with(d/2, 4, true), SystemMinIOPeers, []int64{d, 0, 0, 0}},
		// Not distributed: admitted items are fetched once, the others by
		// every node: epoch 1 = G + M(D - G), then M(D - G).
		{"peers, every node reads all", with(d/4, 2, false), SystemMinIOPeers, []int64{d/2 + d, d, d, d}},
		{"peers of one node = minio", with(d/4, 1, true), SystemMinIOPeers, []int64{d, d * 3 / 4, d * 3 / 4, d * 3 / 4}},
		{"page cache holding everything", with(d, 1, false), SystemPageCache, []int64{d, 0, 0, 0}},
		{"page cache of nothing", with(0, 2, false), SystemPageCache, []int64{2 * d, 2 * d, 2 * d, 2 * d}},
	}
	for _, tc := range tests {
		got := clusterBytes(t, tc.in, tc.system)
		for i := range tc.want {
			if math.Abs(float64(got[i]-tc.want[i])) > 2 {
				t.Errorf("%s: backend bytes per epoch %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
}

// The per-node split adds up, and the peers' reads from other nodes are
// (M-1)/M of a node's reads.
func TestClusterPeerSplit(t *testing.T) {
	const d = 9_000_000
	in := ClusterInput{DatasetBytes: d, Files: 900, CacheBytes: d / 5, Nodes: 3, Distributed: true, BackendRate: 3e6, Epochs: 2}
	res, err := Cluster(in)
	if err != nil {
		t.Fatal(err)
	}
	e := res.Systems[2].Epochs[1]
	// A node reads D/3; D/9 of it are its own items, 3/5 of which it holds.
	want := ClusterEpoch{ReadBytes: d / 3, HitBytes: d / 15, PeerBytes: 2 * d / 9, MissBytes: d/9 - d/15, BackendBytes: (d - 3*d/5) / 3}
	if e.ReadBytes != want.ReadBytes || e.HitBytes != want.HitBytes || e.PeerBytes != want.PeerBytes ||
		e.MissBytes != want.MissBytes || e.BackendBytes != want.BackendBytes {
		t.Errorf("epoch 2 = %+v, want %+v", e, want)
	}
	if e.HitBytes+e.PeerBytes+e.MissBytes != e.ReadBytes {
		t.Errorf("split %+v does not add up", e)
	}
	// Backend 1 MB/s per node: 1.2 MB take 1.2 s; the peer network is free.
	if !near(e.FetchSeconds, 1.2) || !near(e.StallSeconds, 1.2) {
		t.Errorf("fetch %v stall %v, want 1.2 s each (no consumer work)", e.FetchSeconds, e.StallSeconds)
	}
	in.PeerRate = 2e6 // 2 MB at 2 MB/s more
	res, _ = Cluster(in)
	if e := res.Systems[2].Epochs[1]; !near(e.FetchSeconds, 2.2) {
		t.Errorf("with a 2 MB/s peer network: fetch %v, want 2.2 s", e.FetchSeconds)
	}
}

func TestClusterTiming(t *testing.T) {
	// D = 1000 in 100 items of 10, no cache, 4 nodes sharing S = 100: 25 per
	// node, 40 s per epoch of fetch.
	base := ClusterInput{DatasetBytes: 1000, Files: 100, Nodes: 4, BackendRate: 100, Epochs: 1}
	tests := []struct {
		name                string
		mod                 func(*ClusterInput)
		fetch, stall, epoch float64
	}{
		{"no consumer work", func(*ClusterInput) {}, 40, 40, 40},
		{"overlapped with a slower fetch", func(in *ClusterInput) { in.ConsumerRate = 50 }, 40, 20, 40},
		{"overlapped with a faster fetch", func(in *ClusterInput) { in.ConsumerRate = 10 }, 40, 0, 100},
		{"serial", func(in *ClusterInput) { in.ConsumerRate, in.Serial = 50, true }, 40, 40, 60},
		// 100 requests of (0.1 + 10/25) s, two at a time: 25 s < 40 s.
		{"latency hidden by concurrency", func(in *ClusterInput) { in.BackendLatencySeconds, in.Concurrency = 0.1, 2 }, 40, 40, 40},
		{"latency-bound", func(in *ClusterInput) { in.BackendLatencySeconds = 0.1 }, 50, 50, 50},
		{"cache rate, all cached", func(in *ClusterInput) { in.CacheBytes, in.CacheRate, in.Epochs = 1000, 100, 2 }, 10, 10, 10},
	}
	for _, tc := range tests {
		in := base
		tc.mod(&in)
		res, err := Cluster(in)
		if err != nil {
			t.Fatal(err)
		}
		eps := res.Systems[1].Epochs // minio
		e := eps[len(eps)-1]
		if !near(e.FetchSeconds, tc.fetch) || !near(e.StallSeconds, tc.stall) || !near(e.EpochSeconds, tc.epoch) {
			t.Errorf("%s: fetch %v stall %v epoch %v, want %v %v %v", tc.name, e.FetchSeconds, e.StallSeconds,
				e.EpochSeconds, tc.fetch, tc.stall, tc.epoch)
		}
	}
}

func TestClusterValidate(t *testing.T) {
	good := ClusterInput{DatasetBytes: 1000, Files: 10, Nodes: 2, BackendRate: 1, Epochs: 1}
	if _, err := Cluster(good); err != nil {
		t.Fatalf("good input: %v", err)
	}
	for name, mod := range map[string]func(*ClusterInput){
		"no dataset":             func(in *ClusterInput) { in.DatasetBytes = 0 },
		"no files":               func(in *ClusterInput) { in.Files = 0 },
		"negative cache":         func(in *ClusterInput) { in.CacheBytes = -1 },
		"no nodes":               func(in *ClusterInput) { in.Nodes = 0 },
		"1025 nodes":             func(in *ClusterInput) { in.Nodes = 1025 },
		"no backend":             func(in *ClusterInput) { in.BackendRate = 0 },
		"NaN backend":            func(in *ClusterInput) { in.BackendRate = math.NaN() },
		"negative latency":       func(in *ClusterInput) { in.BackendLatencySeconds = -1 },
		"no epochs":              func(in *ClusterInput) { in.Epochs = 0 },
		"fewer files than nodes": func(in *ClusterInput) { in.Files, in.Nodes, in.Distributed = 2, 3, true },
	} {
		in := good
		mod(&in)
		if _, err := Cluster(in); !errors.Is(err, ErrClusterInput) {
			t.Errorf("%s: err %v, want ErrClusterInput", name, err)
		}
	}
}

// Pure LRU under a fresh permutation per epoch hits less than its share:
// about 3.4% / 15.4% / 40.3% at f = 0.25 / 0.5 / 0.75, where MinIO hits f.
func TestLRUHitRatio(t *testing.T) {
	for _, tc := range []struct{ f, lo, hi float64 }{{0, 0, 0}, {0.25, 0.03, 0.04}, {0.5, 0.145, 0.165}, {0.75, 0.39, 0.415}, {1, 1, 1}} {
		in := ClusterInput{DatasetBytes: 20_000_000, Files: 20_000, CacheBytes: int64(tc.f * 20_000_000), Nodes: 1,
			BackendRate: 1, Epochs: 3, ChunkBytes: DefaultChunkBytes, LRUSample: DefaultLRUSample}
		r, n := simulateLRU(in)
		if n != 20_000 || r[0] != 0 {
			t.Errorf("f=%v: %d items, epoch 1 ratio %v; want 20000 and a cold 0", tc.f, n, r[0])
		}
		for e, h := range r[1:] {
			if h < tc.lo || h > tc.hi {
				t.Errorf("f=%v: epoch %d hit ratio %.4f, want in [%v, %v]", tc.f, e+2, h, tc.lo, tc.hi)
			}
		}
	}
}

// Scaling the LRU simulation down to DefaultLRUSample items changes the
// hit ratio by less than 0.5 percentage points against all 300,000.
func TestLRUSampleScaling(t *testing.T) {
	for _, f := range []float64{0.25, 0.5, 0.75} {
		in := ClusterInput{DatasetBytes: 300_000_000, Files: 300_000, CacheBytes: int64(f * 300_000_000), Nodes: 1,
			BackendRate: 1, Epochs: 2, ChunkBytes: DefaultChunkBytes, Seed: 9}
		in.LRUSample = 300_000
		full, _ := simulateLRU(in)
		in.LRUSample = DefaultLRUSample
		sample, n := simulateLRU(in)
		if n != DefaultLRUSample {
			t.Fatalf("sampled %d items, want %d", n, DefaultLRUSample)
		}
		t.Logf("f=%v: epoch 2 hit ratio %.4f with all items, %.4f with %d", f, full[1], sample[1], n)
		if d := math.Abs(full[1] - sample[1]); d > 0.005 {
			t.Errorf("f=%v: hit ratio %.4f with all items, %.4f with the sample: %.4f apart, want <= 0.005", f, full[1], sample[1], d)
		}
	}
}

// With DistributedSampler and C < D/M, a node never re-reads an item
// within an epoch, and after reading C of its part its LRU holds only this
// epoch's items: at read j of the epoch it holds C - j of earlier ones, so
// it hits (C/D)^2 * M/2 of its reads, where MinIO hits C/D.
func TestLRUDistributed(t *testing.T) {
	in := ClusterInput{DatasetBytes: 100_000_000, Files: 100_000, CacheBytes: 10_000_000, Nodes: 8, Distributed: true,
		BackendRate: 1, Epochs: 4, ChunkBytes: DefaultChunkBytes, LRUSample: DefaultLRUSample, Seed: 3}
	r, _ := simulateLRU(in)
	for e, h := range r[1:] {
		if math.Abs(h-0.04) > 0.004 {
			t.Errorf("epoch %d: hit ratio %.4f, want 0.1^2 * 8/2 = 0.04 +- 0.004", e+2, h)
		}
	}
}
