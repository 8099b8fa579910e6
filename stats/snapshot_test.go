package stats

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var update = flag.Bool("update", false, "rewrite testdata/snapshot.golden.json")

// scenario plays two epochs over 8 files of 1000 bytes, read in 500-byte
// parts, against a cache that holds half of the dataset, under a fake
// clock: epoch 1 is cold (every item from the backend, 100 ms each, two
// readers overlapping), epoch 2 hits the cache for half of the files.
func scenario(t *testing.T, reg *prometheus.Registry) *Recorder {
	t.Helper()
	const files, size = 8, 1000
	var used int64
	r := New(Options{
		Registry:     reg,
		Files:        files,
		DatasetBytes: files * size,
		CacheBytes:   files * size / 2,
		PathOf:       func(id uint32) string { return fmt.Sprintf("train/class%d/img%03d.jpg", id%2, id) },
		SizeOf:       func(uint32) int64 { return size },
		CacheFill: func() []TierFill {
			return []TierFill{{Tier: "memory", UsedBytes: used, BudgetBytes: files * size / 2, Items: used / size}}
		},
	})
	for f := range uint32(files) {
		for part := range 2 {
			time.Sleep(50 * time.Millisecond)
			r.Read(f, Backend, size/2, 100*time.Millisecond)
			r.BackendRequest(nil, false)
			_ = part
		}
		if used < files*size/2 {
			used += size
		}
	}
	r.BackendRequest(fmt.Errorf("throttled"), false)
	r.BackendRequest(nil, true)
	time.Sleep(time.Second)
	for f := range uint32(files) {
		src, blocked := Memory, time.Duration(0)
		if f >= files/2 {
			src, blocked = Backend, 80*time.Millisecond
		}
		if f == 3 {
			r.Prefetched(7, size)
		}
		if f == 7 {
			src, blocked = Memory, 0
			r.PrefetchHit(f, size)
		}
		for range 2 {
			time.Sleep(10 * time.Millisecond)
			r.Read(f, src, size/2, blocked)
		}
	}
	r.Read(5, Disk, 100, 0) // epoch 3 begins with a re-read
	time.Sleep(time.Second)
	return r
}

func TestSnapshotGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := scenario(t, nil)
		got, err := json.MarshalIndent(r.Snapshot(3), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", "snapshot.golden.json")
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./stats -run Golden -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("snapshot JSON changed (schema is a stable interface; if intended, -update and document in docs/stats.md):\n%s", got)
		}
		// The document decodes back into the same value.
		var back Snapshot
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		again, _ := json.MarshalIndent(back, "", "  ")
		if !bytes.Equal(append(again, '\n'), got) {
			t.Fatalf("snapshot does not round-trip through JSON")
		}
	})
}

func TestScenarioNumbers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := scenario(t, nil).Snapshot(3)
		if len(s.Epochs) != 3 || !s.Epochs[0].Complete || !s.Epochs[1].Complete || s.Epochs[2].Complete {
			t.Fatalf("epochs = %+v, want 2 complete and 1 open", s.Epochs)
		}
		e1, e2 := s.Epochs[0], s.Epochs[1]
		if e1.HitRate != 0 || e2.HitRate != 0.625 || e2.OptimalHitRate != 0.5 || e1.OptimalHitRate != 0 {
			t.Fatalf("hit rates %v %v optimal %v %v, want 0, 0.625, 0, 0.5", e1.HitRate, e2.HitRate, e1.OptimalHitRate, e2.OptimalHitRate)
		}
		if e1.Files != 8 || e1.Bytes != 8000 || e1.EndReason != "full_pass" || e2.EndReason != "full_pass" {
			t.Fatalf("epoch 1 = %+v / epoch 2 = %+v", e1, e2)
		}
		// Epoch 2 waits less than epoch 1: fetch stall 16 x 100 ms vs 6 x 80 ms.
		if e1.FetchStallSeconds != 1.6 || !near(e2.FetchStallSeconds, 0.48) || e2.Seconds >= e1.Seconds ||
			e1.StallShare != 1 || e1.Seconds != 0.85 {
			t.Fatalf("stall %v, %v seconds %v, %v", e1.FetchStallSeconds, e2.FetchStallSeconds, e1.Seconds, e2.Seconds)
		}
		if len(s.Files) != 3 || s.Files[0].StallSeconds < s.Files[2].StallSeconds {
			t.Fatalf("top files = %+v", s.Files)
		}
	})
}

// TestMetricsAgreeWithSnapshot scrapes the registry and compares every
// series with the snapshot taken at the same moment.
func TestMetricsAgreeWithSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		r := scenario(t, reg)
		s := r.Snapshot(0)
		b := s.Totals
		want := fmt.Sprintf(`
# HELP stallfs_read_bytes_total Bytes read through the mount, by the source that served them.
# TYPE stallfs_read_bytes_total counter
stallfs_read_bytes_total{source="backend"} %d
stallfs_read_bytes_total{source="disk"} %d
stallfs_read_bytes_total{source="memory"} %d
stallfs_read_bytes_total{source="peer"} %d
# HELP stallfs_reads_total Read item-parts served, by source.
# TYPE stallfs_reads_total counter
stallfs_reads_total{source="backend"} %d
stallfs_reads_total{source="disk"} %d
stallfs_reads_total{source="memory"} %d
stallfs_reads_total{source="peer"} %d
# HELP stallfs_fetch_stall_seconds_total Time readers waited for data that was in no cache tier, summed over readers.
# TYPE stallfs_fetch_stall_seconds_total counter
stallfs_fetch_stall_seconds_total %v
# HELP stallfs_backend_requests_total Backend requests made.
# TYPE stallfs_backend_requests_total counter
stallfs_backend_requests_total %d
# HELP stallfs_backend_errors_total Backend requests that failed.
# TYPE stallfs_backend_errors_total counter
stallfs_backend_errors_total %d
# HELP stallfs_backend_retries_total Backend requests that retried a failed one.
# TYPE stallfs_backend_retries_total counter
stallfs_backend_retries_total %d
# HELP stallfs_epoch Number of the current epoch.
# TYPE stallfs_epoch gauge
stallfs_epoch %d
# HELP stallfs_cache_used_bytes Bytes admitted to a cache tier.
# TYPE stallfs_cache_used_bytes gauge
stallfs_cache_used_bytes{tier="memory"} %d
`, b.BytesBySource.Backend, b.BytesBySource.Disk, b.BytesBySource.Memory, b.BytesBySource.Peer,
			b.ReadsBySource.Backend, b.ReadsBySource.Disk, b.ReadsBySource.Memory, b.ReadsBySource.Peer,
			b.FetchStallSeconds, s.Backend.Requests, s.Backend.Errors, s.Backend.Retries, s.Epoch,
			s.Cache.Tiers[0].UsedBytes)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
			"stallfs_read_bytes_total", "stallfs_reads_total", "stallfs_fetch_stall_seconds_total",
			"stallfs_backend_requests_total", "stallfs_backend_errors_total", "stallfs_backend_retries_total",
			"stallfs_epoch", "stallfs_cache_used_bytes"); err != nil {
			t.Fatal(err)
		}
		if b.BytesBySource.Backend == 0 || s.Epoch != 3 {
			t.Fatalf("scenario too thin: %+v epoch %d", b, s.Epoch)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "stallfs_read_latency_seconds" {
				continue
			}
			h := mf.GetMetric()[0].GetHistogram()
			if int64(h.GetSampleCount()) != b.Reads || !near(h.GetSampleSum(), b.FetchStallSeconds) {
				t.Fatalf("latency histogram count %d sum %v, want %d %v", h.GetSampleCount(), h.GetSampleSum(), b.Reads, b.FetchStallSeconds)
			}
			for _, bk := range h.GetBucket() {
				if bk.GetUpperBound() < 0.05 && bk.GetCumulativeCount() != uint64(b.ReadsBySource.Memory+b.ReadsBySource.Disk) {
					t.Fatalf("bucket le=%v holds %d, want the %d cache hits", bk.GetUpperBound(), bk.GetCumulativeCount(), b.ReadsBySource.Memory+b.ReadsBySource.Disk)
				}
			}
		}
		if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
			t.Fatalf("lint: %v %+v", err, problems)
		}
	})
}
