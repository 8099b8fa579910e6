package stats

import (
	"math"
	"testing"
	"testing/synctest"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestWhatIfFormula(t *testing.T) {
	const gib = 1 << 30
	// D = 100 GiB, C = 10 GiB/s, S = 1 GiB/s, R = 2 GiB/s.
	in := WhatIfInput{DatasetBytes: 100 * gib, CacheBytes: 25 * gib, CacheRate: 10 * gib,
		BackendRate: 1 * gib, ConsumerRate: 2 * gib, Budgets: []int64{50 * gib, 200 * gib, 0}}
	res := WhatIf(in)
	if !res.Valid || len(res.Rows) != 4 {
		t.Fatalf("result = %+v, want 4 valid rows", res)
	}
	tests := []struct {
		x, fetch float64
	}{
		{0.25, 100*0.25/10 + 100*0.75/1},
		{0.5, 100*0.5/10 + 100*0.5/1},
		{1, 100.0 / 10},
		{0, 100},
	}
	for i, tc := range tests {
		r := res.Rows[i]
		if !near(r.Fraction, tc.x) || !near(r.FetchSeconds, tc.fetch) || !near(r.ConsumeSeconds, 50) ||
			!near(r.StallSeconds, math.Max(0, tc.fetch-50)) {
			t.Errorf("row %d = %+v, want x %v fetch %v consume 50", i, r, tc.x, tc.fetch)
		}
	}
	// x/10 + (1-x)/1 <= 1/2  <=>  x >= (1 - 0.5)/(1 - 0.1) = 5/9.
	if !res.StallFreeKnown || !res.StallFreeReachable || !near(res.StallFreeFraction, 5.0/9) ||
		res.StallFreeBytes != int64(math.Ceil(5.0/9*100*gib)) {
		t.Fatalf("stall free = %+v, want x = 5/9", res)
	}
}

func TestWhatIfEdges(t *testing.T) {
	tests := []struct {
		name      string
		in        WhatIfInput
		valid     bool
		known     bool
		reachable bool
		x         float64
	}{
		{"no dataset size", WhatIfInput{BackendRate: 1, ConsumerRate: 1}, false, false, false, 0},
		{"no backend rate", WhatIfInput{DatasetBytes: 10, ConsumerRate: 1}, false, false, false, 0},
		{"no consumer rate", WhatIfInput{DatasetBytes: 10, BackendRate: 1}, true, false, false, 0},
		{"backend keeps up", WhatIfInput{DatasetBytes: 10, BackendRate: 5, CacheRate: 50, ConsumerRate: 4}, true, true, true, 0},
		{"consumer faster than cache", WhatIfInput{DatasetBytes: 10, BackendRate: 1, CacheRate: 2, ConsumerRate: 3}, true, true, false, 0},
		{"unmeasured cache is free", WhatIfInput{DatasetBytes: 10, BackendRate: 1, ConsumerRate: 2}, true, true, true, 0.5},
	}
	for _, tc := range tests {
		res := WhatIf(tc.in)
		if res.Valid != tc.valid || res.StallFreeKnown != tc.known || res.StallFreeReachable != tc.reachable ||
			!near(res.StallFreeFraction, tc.x) {
			t.Errorf("%s: got valid %v known %v reachable %v x %v, want %v %v %v %v", tc.name, res.Valid,
				res.StallFreeKnown, res.StallFreeReachable, res.StallFreeFraction, tc.valid, tc.known, tc.reachable, tc.x)
		}
	}
}

// A cold first epoch (nothing cached) does not count in the cache rate C:
// only the epochs that read from a cache tier say how fast it serves.
func TestCacheRateSkipsColdEpoch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(Options{Files: 2, DatasetBytes: 2000, CacheBytes: 2000})
		r.Read(0, Backend, 1000, time.Second)
		time.Sleep(3 * time.Second) // the consumer works, nobody waits
		r.Read(1, Backend, 1000, time.Second)
		time.Sleep(time.Second)
		r.Read(0, Memory, 1000, 0) // epoch 2 starts here
		time.Sleep(2 * time.Second)
		r.Read(1, Memory, 1000, 0) // and ends here, 2 s later
		s := r.Snapshot(0)
		if len(s.Epochs) != 2 || s.Epochs[1].Seconds != 2 {
			t.Fatalf("epochs %+v, want 2, the second 2 s long", s.Epochs)
		}
		if got := s.WhatIf.Inputs.CacheRate; got != 1000 {
			t.Errorf("cache rate %v, want 2000 bytes / 2 s of epoch 2", got)
		}
	})
}
