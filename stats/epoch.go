package stats

import (
	"math"
	"sync/atomic"
	"time"
)

// Epoch detection. Each file carries the tag of the epoch it was last read
// in and its bytes read in that epoch; each group of files counts, under
// the same tag, its files touched and its files fully read. Groups are few
// (one per 1024 files, at most 64) so that a group's share estimates the
// dataset's. No boundary walks the table: a stale tag reads as "not yet
// read in this epoch".
//
// An epoch ends by itself when every file was fully read in it (each group
// reaches its file count; the last group to do so closes the epoch), or at
// a re-read of a file after at least reReadShare of the files were touched
// (the next epoch has begun while a few files of this one were still in a
// loader's reorder window). SetEpoch closes epochs explicitly and switches
// the detector off.

// reReadShare is the share of files that must have been read in an epoch
// before a re-read ends it.
const reReadShare = 0.9

// A file's first read in an epoch is early when fewer than 1/earlyDiv (5%)
// of its group's files were touched before it.
const earlyDiv = 20

// A file's state word: epoch tag (16 bits) | early (1) | bytes in the epoch (47).
const (
	tagBits   = 16
	tagShift  = 64 - tagBits
	earlyBit  = 1 << (tagShift - 1)
	bytesMask = earlyBit - 1
	low24     = 1<<24 - 1
)

// tagOf maps the epoch sequence to a tag in 1..2^16-1 (0 is "never read").
func tagOf(seq uint64) uint64 { return (seq-1)%(1<<tagBits-1) + 1 }

// epochStep carries what enterEpoch learned about a read to finishEpoch.
type epochStep struct {
	seq              uint64
	first, completed bool
}

// enterEpoch updates the file's epoch state for a read of n bytes, before
// the read is counted: a re-read that ends the epoch belongs to the next.
func (r *Recorder) enterEpoch(e *fileEntry, g group, n int64, size int64) epochStep {
	for attempt := 0; ; attempt++ {
		var seq, oldBytes, newBytes uint64
		var first, early bool
		for {
			// The word first, then the epoch: a word tagged by a newer epoch
			// is then never mistaken for a stale one and reset.
			old := e.state.Load()
			seq = r.epochSeq.Load()
			tag := tagOf(seq)
			first = old>>tagShift != tag
			if first {
				oldBytes = 0
				early = g.early(seq)
			} else {
				oldBytes = old & bytesMask
				early = old&earlyBit != 0
			}
			newBytes = min(oldBytes+uint64(n), bytesMask)
			nw := tag<<tagShift | newBytes
			if early {
				nw |= earlyBit
			}
			if e.state.CompareAndSwap(old, nw) {
				break
			}
		}
		var completed, reread bool
		switch {
		case size < 0:
			completed, reread = first, !first
		case first:
			completed = newBytes >= uint64(size)
		default:
			reread = oldBytes >= uint64(size)
			completed = !reread && newBytes >= uint64(size)
		}
		// A re-read of a file first read early in this epoch is most likely a
		// leftover of the previous epoch's reorder window read for real now.
		// The own group's share is a cheap, local estimate of the dataset's;
		// only near the end of an epoch is the exact count summed.
		if reread && attempt == 0 && !early && !r.explicit.Load() &&
			g.share(seq) >= reReadShare-0.1 && r.touchedShare(seq) >= reReadShare {
			r.advance(seq, "reread")
			continue // count the read as the new epoch's first of this file
		}
		return epochStep{seq: seq, first: first, completed: completed}
	}
}

// finishEpoch counts the read's file as touched or fully read, after the
// read itself was counted: the read that completes an epoch belongs to it.
func (r *Recorder) finishEpoch(g group, st epochStep) {
	if st.first || st.completed {
		r.groupTouch(g, st.seq, st.first, st.completed)
	}
}

// groupTouch counts a file of g touched and/or fully read in epoch seq.
func (r *Recorder) groupTouch(g group, seq uint64, touched, completed bool) {
	tag := tagOf(seq)
	var done uint64
	for {
		old := g.touch.Load() // before the epoch check, as in enterEpoch
		if r.epochSeq.Load() != seq {
			return // the epoch ended meanwhile; the file counts again when read next
		}
		t, d := old>>24&low24, old&low24
		if old>>tagShift != tag {
			t, d = 0, 0
		}
		if touched {
			t++
		}
		if completed {
			d++
		}
		if g.touch.CompareAndSwap(old, tag<<tagShift|min(t, low24)<<24|min(d, low24)) {
			done = d
			break
		}
	}
	if !completed || done != g.files {
		return
	}
	// This group is complete; count it, and close the epoch with the last.
	for {
		old := r.groupsDone.Load()
		if r.epochSeq.Load() != seq {
			return
		}
		c := old & (1<<32 - 1)
		if old>>32 != tag {
			c = 0
		}
		c++
		if r.groupsDone.CompareAndSwap(old, tag<<32|c) {
			if c == r.liveGroups && !r.explicit.Load() {
				r.advance(seq, "full_pass")
			}
			return
		}
	}
}

// touchedFiles is the number of files touched in epoch seq.
func (r *Recorder) touchedFiles(seq uint64) int64 {
	tag := tagOf(seq)
	var n int64
	for i := range r.groupFiles {
		v := r.shards[i<<(shardBits-r.groupBits)].touch.Load()
		if v>>tagShift == tag {
			n += int64(v >> 24 & low24)
		}
	}
	return n
}

// group is one epoch-detection group of files: its counters word and its
// file count. The word lives in the first cache line of the shard whose
// index has the group's index as its top bits; with 64 groups (datasets of
// 64K files and more) that is the very shard the file's read counts in, so
// a cache hit writes one shared line, not two.
type group struct {
	touch *atomic.Uint64 // tag<<48 | files touched<<24 | files fully read
	files uint64
}

// groupBitsFor is log2 of the number of groups for a dataset of n files.
func groupBitsFor(n int) int {
	b := 0
	for b < shardBits && n>>(b+1) >= 1024 {
		b++
	}
	return b
}

// groupIndex returns file's group (the top bits of its shard's hash; a
// shift by 32 is 0).
func (r *Recorder) groupIndex(file uint32) int {
	return int((file * 0x9E3779B1) >> (32 - r.groupBits))
}

// groupOf returns file's group.
func (r *Recorder) groupOf(file uint32) group {
	i := r.groupIndex(file)
	return group{touch: &r.shards[i<<(shardBits-r.groupBits)].touch, files: r.groupFiles[i]}
}

// early reports whether fewer than 1/earlyDiv of g's files were touched in
// epoch seq (integer arithmetic: it runs on every first read of a file).
func (g group) early(seq uint64) bool {
	v := g.touch.Load()
	return v>>tagShift != tagOf(seq) || (v>>24&low24)*earlyDiv < g.files
}

// share is the share of g's files touched in epoch seq.
func (g group) share(seq uint64) float64 {
	v := g.touch.Load()
	if v>>tagShift != tagOf(seq) {
		return 0
	}
	return ratio(float64(v>>24&low24), float64(g.files))
}

// touchedShare is the share of the dataset's files touched in epoch seq.
func (r *Recorder) touchedShare(seq uint64) float64 {
	if r.passFiles == 0 {
		return 0
	}
	return float64(r.touchedFiles(seq)) / float64(r.passFiles)
}

// advance ends epoch seq if it is still the current one.
func (r *Recorder) advance(seq uint64, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.epochSeq.Load() != seq {
		return
	}
	r.closeEpochLocked(reason, r.epochNum.Load()+1)
}

// closeEpochLocked appends the current epoch's row (when it had reads) and
// starts epoch number next.
func (r *Recorder) closeEpochLocked(reason string, next int64) {
	now := time.Now()
	seq := r.epochSeq.Load()
	tot := r.sum()
	var maxNs int64
	for i := range r.shards {
		maxNs = max(maxNs, int64(r.shards[i].maxNs.Swap(0)))
	}
	row := r.rowLocked(tot, seq, maxNs, now)
	row.Complete = true
	row.EndReason = reason
	r.base = tot
	r.maxClose = max(r.maxClose, maxNs)
	r.epochStart.Store(0)
	r.epochNum.Store(next)
	r.epochSeq.Store(seq + 1)
	if row.Reads == 0 {
		return
	}
	r.closed++
	r.closedS += row.Seconds
	r.rows = append(r.rows, row)
	if len(r.rows) > maxEpochRows {
		r.rows = append(r.rows[:0], r.rows[1:]...)
		r.dropped++
	}
	r.log.Info("epoch ended", "epoch", row.Epoch, "reason", reason, "seconds", row.Seconds,
		"bytes", row.Bytes, "fetch_stall_seconds", row.FetchStallSeconds, "hit_rate", row.HitRate)
}

// rowLocked builds the row of the current epoch (seq) from the totals tot.
func (r *Recorder) rowLocked(tot counters, seq uint64, maxNs int64, now time.Time) EpochRow {
	c := tot.minus(r.base)
	row := EpochRow{
		Epoch:             r.epochNum.Load(),
		Files:             r.touchedFiles(seq),
		Reads:             c.totalReads(),
		Bytes:             c.totalBytes(),
		BytesBySource:     bySource(c.bytes),
		ReadsBySource:     bySource(c.reads),
		FetchStallSeconds: secs(c.stallNs),
		StallWallSeconds:  secs(c.busyNs),
		BackendWaitBytes:  c.backendBusyBytes,
		BackendWaitSecs:   secs(c.backendBusyNs),
		PrefetchedBytes:   c.prefetchBytes,
		PrefetchHits:      c.prefetchHits,
		LatencyMaxSeconds: secs(maxNs),
	}
	if start := r.epochStart.Load(); start != 0 {
		row.Start = time.Unix(0, start).UTC()
		row.Seconds = max(now.Sub(row.Start).Seconds(), 0)
	}
	row.StallShare = math.Min(ratio(row.StallWallSeconds, row.Seconds), 1)
	row.HitRate = ratio(float64(c.cachedBytes()), float64(row.Bytes))
	row.OptimalHitRate = r.optimalHitRate(r.closed == 0)
	row.LatencyP50Seconds = c.quantile(0.50, row.LatencyMaxSeconds)
	row.LatencyP99Seconds = c.quantile(0.99, row.LatencyMaxSeconds)
	return row
}

// optimalHitRate is the MinIO cache's hit rate: in the first epoch the
// share already cached when the recorder started (0 for a cold cache),
// afterwards min(1, cache budget / dataset).
func (r *Recorder) optimalHitRate(firstEpoch bool) float64 {
	cached := r.opts.CacheBytes
	if firstEpoch {
		cached = r.warmBytes
	}
	return math.Min(ratio(float64(cached), float64(r.opts.DatasetBytes)), 1)
}

// bySource converts per-source counters to their JSON form.
func bySource(v [numSources]int64) BySource {
	return BySource{Memory: v[Memory], Disk: v[Disk], Peer: v[Peer], Backend: v[Backend]}
}
