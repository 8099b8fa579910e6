package stats

import (
	"math"
	"math/bits"
	"sync/atomic"
)

// The totals are striped over shards chosen by a hash of the file ID, so
// that readers of different files rarely write the same cache line. A
// Snapshot or a scrape sums the shards.
const (
	shardBits = 6
	numShards = 1 << shardBits
)

// Latency buckets: bucket 0 holds blocked times under 2^10 ns (including
// every cache hit, which blocks 0); bucket i > 0 holds [2^(i+9), 2^(i+10)) ns;
// the last bucket also holds everything longer. Upper bounds run from
// 1.024 us to 68.7 s. Only buckets 1.. are counted on the hot path; bucket 0
// is the read count minus the rest.
const numBuckets = 27

// bucketOf returns the latency bucket of a blocked time in ns.
func bucketOf(ns uint64) int {
	b := bits.Len64(ns) - 10
	return min(max(b, 0), numBuckets-1)
}

// bucketUpper is bucket i's upper bound in seconds.
func bucketUpper(i int) float64 {
	return float64(uint64(1)<<(i+10)) / 1e9
}

// shardOf maps a file ID to its shard (Fibonacci hashing, so that
// consecutive IDs land on different shards).
func shardOf(file uint32) int {
	return int((file * 0x9E3779B1) >> (32 - shardBits))
}

// shard is one stripe of the totals. Its size is a multiple of 64 bytes so
// that shards never share a cache line.
// Its first line holds what a cache hit writes: the epoch group word and
// the bytes and reads of memory and disk.
type shard struct {
	touch            atomic.Uint64 // an epoch group's counters, see group
	bytes            [numSources]atomic.Uint64
	reads            [numSources]atomic.Uint64
	stallNs          atomic.Uint64
	maxNs            atomic.Uint64 // largest blocked ns in the current epoch
	hist             [numBuckets]atomic.Uint64
	prefetchFetches  atomic.Uint64
	prefetchBytes    atomic.Uint64
	prefetchHits     atomic.Uint64
	prefetchHitBytes atomic.Uint64
	_                [64 - (1+2*int(numSources)+2+numBuckets+4)*8%64]byte
}

// fileEntry is the per-file row: 32 bytes, so 1.3M files take 41.6 MB.
type fileEntry struct {
	state   atomic.Uint64 // epoch tag<<48 | bytes read in that epoch
	bytes   atomic.Uint64
	stallNs atomic.Uint64
	reads   atomic.Uint32
	meta    atomic.Uint32 // sources seen (bits 0-3), last source (4-5), first fetch epoch+1 (8-31)
}

const (
	metaLastShift  = 4
	metaLastMask   = 3 << metaLastShift
	metaEpochShift = 8
	metaEpochMax   = 1<<24 - 1
)

// counters is the sum of the shards and the busy unions at one moment.
type counters struct {
	reads            [numSources]int64
	bytes            [numSources]int64
	stallNs          int64
	hist             [numBuckets]int64 // bucket 0 derived
	prefetchFetches  int64
	prefetchBytes    int64
	prefetchHits     int64
	prefetchHitBytes int64
	busyNs           int64
	backendBusyNs    int64
	backendBusyBytes int64
	backendBusyReads int64
}

// sum adds up the shards and reads the busy unions.
func (r *Recorder) sum() counters {
	var c counters
	for i := range r.shards {
		sh := &r.shards[i]
		for s := range numSources {
			c.reads[s] += int64(sh.reads[s].Load())
			c.bytes[s] += int64(sh.bytes[s].Load())
		}
		c.stallNs += int64(sh.stallNs.Load())
		for b := 1; b < numBuckets; b++ {
			c.hist[b] += int64(sh.hist[b].Load())
		}
		c.prefetchFetches += int64(sh.prefetchFetches.Load())
		c.prefetchBytes += int64(sh.prefetchBytes.Load())
		c.prefetchHits += int64(sh.prefetchHits.Load())
		c.prefetchHitBytes += int64(sh.prefetchHitBytes.Load())
	}
	c.hist[0] = c.totalReads()
	for b := 1; b < numBuckets; b++ {
		c.hist[0] -= c.hist[b]
	}
	c.hist[0] = max(c.hist[0], 0)
	r.busyMu.Lock()
	c.busyNs = r.busy.allNs
	c.backendBusyNs = r.busy.backendNs
	c.backendBusyBytes = r.busy.backendBytes
	c.backendBusyReads = r.busy.backendReads
	r.busyMu.Unlock()
	return c
}

func (c *counters) totalReads() int64 {
	var n int64
	for _, v := range c.reads {
		n += v
	}
	return n
}

func (c *counters) totalBytes() int64 {
	var n int64
	for _, v := range c.bytes {
		n += v
	}
	return n
}

// cachedBytes is the bytes served by a cache tier (memory, disk or peer).
func (c *counters) cachedBytes() int64 {
	return c.bytes[Memory] + c.bytes[Disk] + c.bytes[Peer]
}

// minus returns c - b, for the counters of one epoch.
func (c counters) minus(b counters) counters {
	for s := range numSources {
		c.reads[s] -= b.reads[s]
		c.bytes[s] -= b.bytes[s]
	}
	c.stallNs -= b.stallNs
	for i := range c.hist {
		c.hist[i] -= b.hist[i]
	}
	c.prefetchFetches -= b.prefetchFetches
	c.prefetchBytes -= b.prefetchBytes
	c.prefetchHits -= b.prefetchHits
	c.prefetchHitBytes -= b.prefetchHitBytes
	c.busyNs -= b.busyNs
	c.backendBusyNs -= b.backendBusyNs
	c.backendBusyBytes -= b.backendBusyBytes
	c.backendBusyReads -= b.backendBusyReads
	return c
}

// quantile returns the q-quantile of the latency histogram in seconds: the
// upper bound of the bucket it falls in, 0 for bucket 0, at most maxSec.
func (c *counters) quantile(q float64, maxSec float64) float64 {
	var total int64
	for _, v := range c.hist {
		total += v
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	var cum int64
	for i, v := range c.hist {
		cum += v
		if cum >= rank {
			if i == 0 {
				return 0
			}
			return min(bucketUpper(i), maxSec)
		}
	}
	return maxSec
}
