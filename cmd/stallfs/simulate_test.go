package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stallfs/stallfs/stats"
)

func simulate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"stallfs", "simulate"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// The JSON is stats.Cluster of the flags: 3 peers, DistributedSampler,
// a fifth of the dataset each.
func TestSimulateJSON(t *testing.T) {
	code, out, errOut := simulate(t, "--dataset", "9000000", "--files", "900", "--cache", "20%", "--nodes", "3",
		"--backend-bandwidth", "3MB/s", "--epochs", "2", "--distributed", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got stats.ClusterResult
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	want, err := stats.Cluster(stats.ClusterInput{DatasetBytes: 9_000_000, Files: 900, CacheBytes: 1_800_000, Nodes: 3,
		BackendRate: 3e6, Epochs: 2, Distributed: true, Concurrency: 8, Seed: 1, LRUSample: stats.DefaultLRUSample,
		ChunkBytes: stats.DefaultChunkBytes})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Systems) != 3 || got.Systems[2].System != stats.SystemMinIOPeers {
		t.Fatalf("systems %+v", got.Systems)
	}
	for i := range want.Systems {
		for e := range want.Systems[i].Epochs {
			if g, w := got.Systems[i].Epochs[e], want.Systems[i].Epochs[e]; g != w {
				t.Errorf("%s epoch %d = %+v, want %+v", want.Systems[i].System, e+1, g, w)
			}
		}
	}
	// Peers, epoch 2: the group holds 3/5, the backend serves 2/5.
	if b := got.Systems[2].Epochs[1].BackendBytesTotal; b != 3_600_000 {
		t.Errorf("peers epoch 2 backend %d, want 3,600,000", b)
	}
}

func TestSimulateText(t *testing.T) {
	code, out, errOut := simulate(t, "--dataset", "140GiB", "--files", "1281167", "--cache", "32GiB", "--nodes", "64",
		"--backend-bandwidth", "10GB/s", "--consumer-rate", "1GB/s", "--backend-latency", "20ms", "--peer-bandwidth", "1.25GB/s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"SYSTEM", "page_cache_lru", "minio_peers", "64 node(s)", "20ms latency",
		"every node reads the whole dataset", "LRU simulated on 100,000 items"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "minio_peers "); n != 4 { // 3 epochs and the summary
		t.Errorf("%d minio_peers lines, want 4:\n%s", n, out)
	}
}

func TestSimulateBadInput(t *testing.T) {
	good := []string{"--dataset", "1GiB", "--files", "1000", "--cache", "10%", "--backend-bandwidth", "1GB/s"}
	with := func(flag, v string) []string {
		out := append([]string(nil), good...)
		for i := 0; i < len(out); i += 2 {
			if out[i] == flag {
				out[i+1] = v
				return out
			}
		}
		return append(out, flag, v)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{good[2:], "--dataset"},
		{with("--dataset", "lots"), "--dataset"},
		{with("--files", "0"), "--files"},
		{with("--cache", "x%"), "--cache"},
		{append(good[:4:4], good[6:]...), "--cache"},
		{good[:6], "--backend-bandwidth: a rate is required"},
		{with("--nodes", "1025"), "--nodes"},
		{with("--nodes", "0"), "--nodes"},
		{with("--backend-bandwidth", "fast"), "--backend-bandwidth"},
		{with("--consumer-rate", "-1GB/s"), "--consumer-rate"},
		{with("--backend-latency", "-1s"), "--backend-latency"},
		{with("--epochs", "0"), "--epochs"},
		{append(with("--files", "3"), "--nodes", "4", "--distributed"), "--distributed"},
		{append(good, "extra"), "unexpected argument"},
		{append(good, "--bogus"), "unknown flag --bogus"},
	} {
		code, out, errOut := simulate(t, tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("simulate %v: exit %d, stdout %q, stderr %q; want 2, nothing, one line naming %s", tc.args, code, out, errOut, tc.want)
		}
	}
}
