// Package fs serves a backend as a read-only FUSE file system: the node
// tree, the read path that composes the cache tiers and the backend,
// the errno mapping, and the control socket.
//
// Invariants:
//
//   - The tree is read once, when the mount starts, and never changes:
//     LOOKUP, GETATTR and READDIR make no backend calls, and the kernel
//     may cache names and attributes for a long time (one hour by
//     default). A changed source is picked up by remounting.
//   - The tree comes from a listing, or from Options.MetadataFile when
//     that file is of this source, intact, and still valid (directory
//     times, or a background re-list that logs and persists changes);
//     never a partial or foreign tree.
//   - Regular files have dense IDs 0..N-1 in the byte order of their
//     slash-separated paths. Inode numbers derive from IDs and directory
//     indexes, so they are stable across lookups and remounts of the
//     same tree.
//   - Symlinks of the source are shown as symlinks with their target;
//     the kernel resolves them (a relative target inside the dataset
//     works; an absolute one points into the host). Devices, pipes and
//     sockets are left out.
//   - Nothing is ever written: the mount is read-only in the kernel and
//     every mutating operation answers EROFS.
//   - A read returns fewer bytes than asked only at end of file. A backend
//     short read is an error (EIO), never short data.
//   - A file is read in items: the whole file up to ChunkSize, else
//     ChunkSize chunks. Each item is fetched from the backend at most once
//     at a time, however many readers want it; the fetch runs under the
//     mount's lifetime, not under a reader's request, so an interrupted
//     reader (EINTR) does not fail the others.
//   - Backend reads are bounded (Options.MaxFills); readahead never blocks
//     a reader and is skipped when its slots are full.
//   - With a peer group (SetPeers), an item another live member owns is
//     read from that owner inside the item's one shared fill, between the
//     local tiers and the backend. A non-owner never admits such an item
//     to its cache, also not when it read it from the backend, unless
//     PeerOptions.CacheOthers; the owner admits by the cache's rule.
//   - A peer fetch holds no backend fill slot, so members waiting on each
//     other's fills cannot exhaust each other's slots.
//   - Any peer failure (down, timeout, bad checksum or length, refusal)
//     falls back to the backend inside the same fill: no read fails or
//     hangs because of a peer.
//   - With KernelCache, OPEN and FLUSH are answered ENOSYS (deliberate,
//     outside toErrno); only pages of items a tier holds outlive a file's
//     next LOOKUP (kcache.go).
//   - READDIRPLUS is off; OPENDIR answers FOPEN_CACHE_DIR|KEEP_CACHE, so
//     the kernel caches listings of the immutable tree; READDIR offset
//     i+1 names child i (readdir.go).
//   - toErrno is the only place an error becomes an errno; unknown errors
//     are EIO, never ENOSYS.
//   - The control socket is found from the mountpoint without adding
//     anything to the listing: the root answers the unlisted xattr
//     ControlXattr with the socket's path.
package fs
