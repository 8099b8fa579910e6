package stats

import (
	"container/heap"
	"strconv"
	"time"
)

// SchemaVersion is the version of the Snapshot JSON document. Fields are
// only ever added within a version; docs/stats.md documents each.
const SchemaVersion = 1

// Snapshot is the stable JSON document served at /v1/stats and printed by
// `stallfs stats --json`.
type Snapshot struct {
	SchemaVersion int          `json:"schema_version"`
	Time          time.Time    `json:"time"`
	Dataset       Dataset      `json:"dataset"`
	Epoch         int64        `json:"epoch"`
	Totals        Totals       `json:"totals"`
	Epochs        []EpochRow   `json:"epochs"`
	EpochsDropped int          `json:"epochs_dropped"`
	Cache         Cache        `json:"cache"`
	Prefetch      Prefetch     `json:"prefetch"`
	Backend       BackendStats `json:"backend"`
	Files         []FileRow    `json:"files,omitempty"`
	WhatIf        WhatIfResult `json:"what_if"`
}

// Dataset describes the mounted dataset.
type Dataset struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// BySource splits a count by the source that served the bytes.
type BySource struct {
	Memory  int64 `json:"memory"`
	Disk    int64 `json:"disk"`
	Peer    int64 `json:"peer"`
	Backend int64 `json:"backend"`
}

// Totals are the counters since the recorder started.
type Totals struct {
	Reads             int64    `json:"reads"`
	Bytes             int64    `json:"bytes"`
	ReadsBySource     BySource `json:"reads_by_source"`
	BytesBySource     BySource `json:"bytes_by_source"`
	FetchStallSeconds float64  `json:"fetch_stall_seconds"`
	StallWallSeconds  float64  `json:"stall_wall_seconds"`
	Seconds           float64  `json:"seconds"`
	HitRate           float64  `json:"hit_rate"`
	LatencyP50Seconds float64  `json:"latency_p50_seconds"`
	LatencyP99Seconds float64  `json:"latency_p99_seconds"`
	LatencyMaxSeconds float64  `json:"latency_max_seconds"`
}

// EpochRow is one epoch's accounting.
type EpochRow struct {
	Epoch             int64     `json:"epoch"`
	Complete          bool      `json:"complete"`
	EndReason         string    `json:"end_reason,omitempty"`
	Start             time.Time `json:"start"`
	Seconds           float64   `json:"seconds"`
	Files             int64     `json:"files"`
	Reads             int64     `json:"reads"`
	Bytes             int64     `json:"bytes"`
	ReadsBySource     BySource  `json:"reads_by_source"`
	BytesBySource     BySource  `json:"bytes_by_source"`
	FetchStallSeconds float64   `json:"fetch_stall_seconds"`
	StallWallSeconds  float64   `json:"stall_wall_seconds"`
	StallShare        float64   `json:"stall_share"`
	HitRate           float64   `json:"hit_rate"`
	OptimalHitRate    float64   `json:"optimal_hit_rate"`
	LatencyP50Seconds float64   `json:"latency_p50_seconds"`
	LatencyP99Seconds float64   `json:"latency_p99_seconds"`
	LatencyMaxSeconds float64   `json:"latency_max_seconds"`
	BackendWaitBytes  int64     `json:"backend_wait_bytes"`
	BackendWaitSecs   float64   `json:"backend_wait_seconds"`
	PrefetchedBytes   int64     `json:"prefetched_bytes"`
	PrefetchHits      int64     `json:"prefetch_hits"`
}

// Cache is the cache's budget and fill per tier.
type Cache struct {
	BudgetBytes int64      `json:"budget_bytes"`
	Tiers       []TierFill `json:"tiers"`
}

// Prefetch counts the prefetcher's work as seen by the reads. The lead may
// add fields reported by the prefetcher itself.
type Prefetch struct {
	FetchedItems    int64 `json:"fetched_items"`
	FetchedBytes    int64 `json:"fetched_bytes"`
	HiddenMisses    int64 `json:"hidden_misses"`
	HiddenBytes     int64 `json:"hidden_bytes"`
	NotHiddenMisses int64 `json:"not_hidden_misses"`
}

// BackendStats counts backend requests.
type BackendStats struct {
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	Retries  int64 `json:"retries"`
}

// FileRow is one file's accounting.
type FileRow struct {
	ID              uint32   `json:"id"`
	Path            string   `json:"path"`
	Reads           int64    `json:"reads"`
	Bytes           int64    `json:"bytes"`
	StallSeconds    float64  `json:"stall_seconds"`
	Source          string   `json:"source"`
	Sources         []string `json:"sources"`
	FirstFetchEpoch *int64   `json:"first_fetch_epoch"`
}

// Snapshot returns the current accounting with the topFiles files that
// stalled most (none when topFiles <= 0).
func (r *Recorder) Snapshot(topFiles int) Snapshot {
	s := Snapshot{SchemaVersion: SchemaVersion, Epochs: []EpochRow{}}
	if r == nil {
		return s
	}
	now := time.Now()
	s.Time = now.UTC()
	s.Dataset = Dataset{Files: r.opts.Files, Bytes: r.opts.DatasetBytes}
	s.Cache = Cache{BudgetBytes: r.opts.CacheBytes, Tiers: []TierFill{}}
	if r.opts.CacheFill != nil {
		s.Cache.Tiers = append(s.Cache.Tiers, r.opts.CacheFill()...)
	}
	s.Backend = BackendStats{
		Requests: int64(r.requests.Load()),
		Errors:   int64(r.errors.Load()),
		Retries:  int64(r.retries.Load()),
	}

	r.mu.Lock()
	tot := r.sum()
	var curMax int64
	for i := range r.shards {
		curMax = max(curMax, int64(r.shards[i].maxNs.Load()))
	}
	s.Epoch = r.epochNum.Load()
	s.Epochs = append(s.Epochs, r.rows...)
	s.EpochsDropped = r.dropped
	var open *EpochRow
	if cur := r.rowLocked(tot, r.epochSeq.Load(), curMax, now); cur.Reads > 0 {
		s.Epochs = append(s.Epochs, cur)
		open = &s.Epochs[len(s.Epochs)-1]
	}
	allMax := max(r.maxClose, curMax)
	seconds := r.closedS
	if open != nil {
		seconds += open.Seconds
	}
	r.mu.Unlock()

	s.Totals = Totals{
		Reads:             tot.totalReads(),
		Bytes:             tot.totalBytes(),
		ReadsBySource:     bySource(tot.reads),
		BytesBySource:     bySource(tot.bytes),
		FetchStallSeconds: secs(tot.stallNs),
		StallWallSeconds:  secs(tot.busyNs),
		Seconds:           seconds,
		LatencyMaxSeconds: secs(allMax),
	}
	s.Totals.HitRate = ratio(float64(tot.cachedBytes()), float64(s.Totals.Bytes))
	s.Totals.LatencyP50Seconds = tot.quantile(0.50, s.Totals.LatencyMaxSeconds)
	s.Totals.LatencyP99Seconds = tot.quantile(0.99, s.Totals.LatencyMaxSeconds)
	s.Prefetch = Prefetch{
		FetchedItems:    tot.prefetchFetches,
		FetchedBytes:    tot.prefetchBytes,
		HiddenMisses:    tot.prefetchHits,
		HiddenBytes:     tot.prefetchHitBytes,
		NotHiddenMisses: tot.backendBusyReads,
	}
	s.WhatIf = WhatIf(r.whatIfInput(s, tot, open))
	if topFiles > 0 {
		s.Files = r.topFiles(topFiles)
	}
	return s
}

// whatIfInput derives the what-if's measured rates from the totals.
func (r *Recorder) whatIfInput(s Snapshot, tot counters, open *EpochRow) WhatIfInput {
	in := WhatIfInput{DatasetBytes: r.opts.DatasetBytes, CacheBytes: r.opts.CacheBytes}
	// Every backend byte counts, also the parts of a fetched item served
	// later without a wait (staged parts, readahead): S is the rate at which
	// the backend delivered per second that readers waited for it.
	in.BackendRate = ratio(float64(tot.bytes[Backend]), secs(tot.backendBusyNs))
	// C: cached bytes over the time no reader waited, in the epochs that
	// read from a cache tier. An epoch that read nothing cached (a cold
	// first epoch) says nothing about the cache's rate; counting its time
	// made C look slower than a warm epoch's whole pace.
	var cached int64
	var free float64
	for _, e := range s.Epochs {
		if c := e.BytesBySource.Memory + e.BytesBySource.Disk + e.BytesBySource.Peer; c > 0 {
			cached += c
			free += max(e.Seconds-e.StallWallSeconds, 0)
		}
	}
	in.CacheRate = ratio(float64(cached), free)
	// The consumer's rate: the last complete epoch, else the open one.
	last := open
	for i := len(s.Epochs) - 1; i >= 0; i-- {
		if s.Epochs[i].Complete {
			last = &s.Epochs[i]
			break
		}
	}
	if last != nil {
		if free := last.Seconds - last.StallWallSeconds; free > 0 {
			in.ConsumerRate = float64(last.Bytes) / free
		}
	}
	return in
}

// topFiles returns the k files with the most stall (then most bytes, then
// lowest ID), in O(n log k).
func (r *Recorder) topFiles(k int) []FileRow {
	h := make(fileHeap, 0, k)
	for id := range r.files {
		e := &r.files[id]
		reads := e.reads.Load()
		if reads == 0 {
			continue
		}
		c := fileCand{id: uint32(id), stall: e.stallNs.Load(), bytes: e.bytes.Load()}
		if len(h) < k {
			heap.Push(&h, c)
		} else if h[0].less(c) {
			h[0] = c
			heap.Fix(&h, 0)
		}
	}
	rows := make([]FileRow, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		rows[i] = r.fileRow(heap.Pop(&h).(fileCand).id)
	}
	return rows
}

// fileRow renders one file's entry.
func (r *Recorder) fileRow(id uint32) FileRow {
	e := &r.files[id]
	meta := e.meta.Load()
	row := FileRow{
		ID:           id,
		Reads:        int64(e.reads.Load()),
		Bytes:        int64(e.bytes.Load()),
		StallSeconds: secs(int64(e.stallNs.Load())),
		Source:       Source(meta & metaLastMask >> metaLastShift).String(),
		Sources:      []string{},
	}
	if r.opts.PathOf != nil {
		row.Path = r.opts.PathOf(id)
	} else {
		row.Path = "#" + strconv.FormatUint(uint64(id), 10)
	}
	for s := range numSources {
		if meta&(1<<s) != 0 {
			row.Sources = append(row.Sources, s.String())
		}
	}
	if ep := meta >> metaEpochShift; ep != 0 {
		v := int64(ep) - 1
		row.FirstFetchEpoch = &v
	}
	return row
}

// fileCand is a candidate for the top files.
type fileCand struct {
	id           uint32
	stall, bytes uint64
}

// less orders candidates from least to most stalled.
func (a fileCand) less(b fileCand) bool {
	if a.stall != b.stall {
		return a.stall < b.stall
	}
	if a.bytes != b.bytes {
		return a.bytes < b.bytes
	}
	return a.id > b.id
}

// fileHeap is a min-heap of candidates: its root is the least stalled.
type fileHeap []fileCand

func (h fileHeap) Len() int           { return len(h) }
func (h fileHeap) Less(i, j int) bool { return h[i].less(h[j]) }
func (h fileHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *fileHeap) Push(x any)        { *h = append(*h, x.(fileCand)) }
func (h *fileHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
