// Package stats accounts every read of a stallfs mount: where its bytes
// came from (memory, disk, peer, backend), how long the reader waited for
// data that was in no cache tier (fetch stall), per file and per epoch; it
// renders the accounting as a stable JSON Snapshot, a readable summary
// (WriteText) and Prometheus metrics, and predicts with the DS-Analyzer
// model how the stall would change with another cache size (WhatIf);
// Cluster extends that prediction to a cluster of nodes (page cache LRU,
// MinIO alone, MinIO + peers), for `stallfs simulate`.
//
// It imports nothing of stallfs; the read path calls a *Recorder (a nil
// Recorder records nothing, so "stats off" costs one nil check).
//
// # Invariants
//
//   - One set of counters. Totals live in 64 cache-line-padded shards
//     chosen by a hash of the file ID; Snapshot, the Prometheus collector
//     and the epoch rows all sum the same shards, so JSON and metrics agree
//     and the hot path counts each event once.
//   - Read allocates nothing (except the row of an epoch it closes) and
//     takes no lock for reads that did not block:
//     about six atomic operations on three cache lines (its shard, its file
//     entry, its file's epoch group). Reads that blocked (misses, which take
//     milliseconds) also take busyMu to extend the union of wait intervals.
//   - totals.bytes = the sum of totals.bytes_by_source = the sum of the
//     epoch rows' bytes (including the epochs dropped from the last 1000
//     kept), up to reads that race with an epoch boundary, which land in
//     exactly one of the two epochs.
//   - Fetch stall is only what a Read reported as blocked; cache hits
//     report 0, so they never stall. A reader that joined another's fetch
//     reports Memory bytes (the fetch's buffer) with its wait: the read
//     path counts a fetch's bytes as Backend once (fs/reader.go). fetch_stall_seconds sums over readers
//     (16 readers blocked 1 s = 16 s); stall_wall_seconds is the wall time
//     during which at least one reader waited, so stall_share is in [0, 1].
//   - Epoch rows are monotonic: an epoch is closed once, under mu, by the
//     first of the detector or SetEpoch to see it current; a closed row
//     never changes.
//
// # Per-file state: a compact table
//
// Each file ID has a 32-byte entry of atomics (reads, bytes, stall ns, the
// bytes it had in the current epoch with that epoch's tag, and a word with
// the set of sources seen, the last source and the epoch of its first
// backend fetch). At ImageNet-1k's 1,281,167 files that is 41 MB, allocated
// once in New (untouched pages cost nothing until read). A table was chosen
// over top-K plus a histogram because epoch detection needs a per-file "read
// in this epoch" mark anyway, and the table gives exact per-file numbers
// and exact top files at Snapshot time (a heap of k over the table:
// O(n log k), about 5 ms at 1.3M files) with no hot-path ordering work.
//
// # Epochs
//
// An epoch ends when every file was fully read in it (all of its bytes,
// when Options.SizeOf is given; one read otherwise), or at a re-read of a
// file after at least 90% of the files were read in it: the next epoch has
// begun while a loader's reorder window still held the last files of this
// one. The re-read opens the next epoch. A file first read in the first 5%
// of its group's files is "early": its re-read ends nothing, because early
// files are mostly the previous epoch's window leftovers. Files are counted
// in groups (one per 1024 files, at most 64) whose touched counters carry
// the epoch's tag, so no boundary walks the table. SetEpoch closes epochs
// explicitly and switches the detector off for good. An epoch starts when
// its first reader began to wait (its first read's end minus its blocked
// time) and ends at its boundary. The last 1000 closed epochs are kept.
//
// A mount that sees only a part of the files each epoch (DistributedSampler
// across hosts) never completes a pass; such jobs announce epochs with
// SetEpoch through the control socket.
//
// # Rates
//
// The what-if's backend rate S is the bytes served from the backend over
// the union of the intervals in which readers waited for it (wall time with
// concurrency: 16 concurrent 1 s fetches of 1 MiB are 16 MiB/s, not 1
// MiB/s; the later parts of a 4 MiB item fetched for its first part count
// as bytes without adding wait). The cache
// rate C is the bytes served from memory, disk and peers over the wall time
// in which no reader waited, in the kept epochs that read from them (a cold
// first epoch says nothing of the cache); when the consumer is slower than
// the cache it is a lower bound. The consumer rate R is the last complete epoch's bytes
// over its wall time minus its stall wall time.
package stats
