package mincache

import "sync/atomic"

// Info is a snapshot of both tiers, printed by `stallfs cache info`.
type Info struct {
	Memory TierInfo `json:"memory"`
	Disk   TierInfo `json:"disk"`
	// Dir is the disk tier's namespace directory ("" without a disk tier).
	Dir string `json:"dir,omitempty"`
}

// TierInfo is the fill level and the counters of one tier. Counters count
// since Open (they are not persisted); Items and UsedBytes of the disk tier
// include what was loaded from the index.
type TierInfo struct {
	BudgetBytes int64 `json:"budget_bytes"`
	// UsedBytes is the budget consumed. Memory: item bytes plus LostBytes.
	// Disk: entry file lengths (header + data) of live entries.
	UsedBytes int64 `json:"used_bytes"`
	// LostBytes (memory only) is arena space of invalidated or aborted
	// entries: the arena is append-only, so it is not reused until Drop.
	LostBytes    int64 `json:"lost_bytes,omitempty"`
	Items        int64 `json:"items"`
	Admitted     int64 `json:"admitted"`
	RejectedFull int64 `json:"rejected_full"`
	Hits         int64 `json:"hits"`
	HitBytes     int64 `json:"hit_bytes"`
	Misses       int64 `json:"misses"`
	Invalidated  int64 `json:"invalidated"`
	// Corrupt (disk only) counts entries dropped because they failed
	// verification (checksum, header, length) or had vanished.
	Corrupt int64 `json:"corrupt,omitempty"`
	Errors  int64 `json:"errors"`
	// ReadBytes (disk only) is every byte read from entry files, headers
	// included; opening with a valid index reads none.
	ReadBytes      int64  `json:"read_bytes,omitempty"`
	Disabled       bool   `json:"disabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
}

// counters are the atomic counters behind TierInfo.
type counters struct {
	admitted, rejectedFull, hits, hitBytes, misses atomic.Int64
	invalidated, corrupt, errors, readBytes        atomic.Int64
}

func (c *counters) fill(ti *TierInfo) {
	ti.Admitted = c.admitted.Load()
	ti.RejectedFull = c.rejectedFull.Load()
	ti.Hits = c.hits.Load()
	ti.HitBytes = c.hitBytes.Load()
	ti.Misses = c.misses.Load()
	ti.Invalidated = c.invalidated.Load()
	ti.Corrupt = c.corrupt.Load()
	ti.Errors = c.errors.Load()
	ti.ReadBytes = c.readBytes.Load()
}
