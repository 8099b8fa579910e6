// Package mincache is stallfs's MinIO cache (CoorDL, VLDB 2021): a
// byte-budgeted store of items that never evicts, so that under a fresh
// random order every epoch after the first hits exactly cache/dataset of
// the data. It imports nothing of stallfs.
//
// # Items and keys
//
// An item is a whole file (at most the chunk size) or one chunk of a larger
// file. It is indexed by a 128-bit SHA-256 prefix of Path+Chunk; the
// Version is stored beside it as a 64-bit hash (memory) or hash and full
// string (disk). A lookup whose Version differs from the stored one
// invalidates the entry (both tiers) and misses: a changed object is never
// served from an old entry.
//
// # Invariants
//
//   - No eviction. Admit tries memory, then disk; an item is admitted to a
//     tier iff it fits in what is left of that tier's budget, so the
//     first-admitted items stay and later ones are rejected (a later,
//     smaller item may still fit). An entry leaves only when its Version
//     changed, on Drop, or (disk) when it fails verification or vanished.
//   - Budgets are never exceeded. Memory: the arena is exactly MemBytes.
//     Disk: the sum of entry file lengths (header + data) of live entries
//     plus in-flight admissions stays <= DiskBytes. An index loaded after
//     the budget was lowered keeps its entries and admits nothing more.
//   - Memory bytes live off the Go heap, in one anonymous mapping
//     (MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE) of MemBytes, bump-allocated.
//     Space of an invalidated entry is counted as lost (Info.LostBytes) and
//     not reused until Drop, which resets the arena and returns its pages
//     with MADV_DONTNEED. The arena asks for transparent huge pages
//     (MADV_HUGEPAGE, best effort). The index is 64 sharded maps of
//     keyHash -> {version hash, offset, length}: about 83 heap bytes per
//     item (TestIndexBytesPerEntry), ~100 MiB for 1.3M items.
//   - Readers copy out of the arena under their shard's read lock; Drop and
//     Close take every shard lock (and wait for in-flight admissions), so no
//     reader ever sees reset or unmapped memory: it gets a miss or the right
//     bytes. Two concurrent admissions of one key store it once.
//   - Disk hits are promoted to memory when the arena has room: the whole
//     item is read straight into the arena and verified before it is
//     published.
//   - A failing cache never fails a read: every error is a miss (ok=false).
//
// # Disk tier layout
//
// Dir/<first 16 hex digits of sha256(Source)>/ is one source's namespace;
// different sources share Dir without collisions. In it:
//
//	lock                       flock(LOCK_EX|LOCK_NB) held while open; holds the pid
//	index                      append-only log of add/del records (see index.go)
//	tmp/                       entries being written; emptied on Open
//	data/<hh>/<keyhash>-<ver>  one file per item: header + data (see entry.go)
//
// An entry is written to tmp/ and renamed into data/, then its "add" record
// is appended to the index. Entry files are not fsync'd one by one: a torn
// or truncated entry fails its checks and is dropped, never served. Every
// read verifies the header CRC32C, that the header names the requested
// Path, Version and Chunk, and the CRC32C of each 64 KiB block it returns
// bytes from (a 128 KiB read of a 4 MiB item hashes at most 192 KiB).
//
// A second Open of the same namespace (this or another process) fails with
// ErrLocked. Open replays the index without reading any entry file, so a
// restart is warm at once; Close rewrites it compacted (temp + fsync +
// rename). A missing or corrupt index is rebuilt by reading only each entry
// file's header. Appends are not fsync'd: a process crash loses nothing
// (they are in the kernel), a power loss may lose the last records; such
// an entry is then an orphan file, not served and not counted, replaced if
// the same version is admitted again and reclaimed by Drop or by deleting
// the index (which forces a rebuild). An indexed entry whose file did not
// reach the disk reads as vanished or corrupt: a miss, and dropped.
//
// # Failures
//
// ENOSPC or any other error writing an entry or the index disables
// admission to the disk tier (Info.Disk.Disabled and DisabledReason),
// logged once; existing entries keep being served while they verify. A
// successful Drop re-enables it. Counters (hits, misses, ...) count since
// Open; they are not persisted.
package mincache
