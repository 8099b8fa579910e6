// Package azblob is the Azure Blob Storage backend of stallfs, on the Azure
// SDK for Go (sdk/storage/azblob), imported here as sdkblob and friends.
//
// A container (optionally below a prefix) is a read-only tree. Blob
// storage is flat; directories come from the "/" in blob names:
//
//   - List asks the service for one level (a "/"-delimited hierarchy
//     listing, every page), sorts it and returns it.
//   - Walk (backend.Walker) reports the names of ONE flat listing of the
//     whole subtree, in its order, and synthesises each directory the
//     first time a descendant names it. With ListConcurrency > 1 (not the
//     default, see DefaultListConcurrency) it gets those names faster: the top levels are listed with
//     the delimiter, then their prefixes flat, in parallel (flat again when
//     the prefixes prove tiny); a failed prefix fails the whole walk (no
//     partial tree). Callers that build a tree for the mount's life use
//     Walk once; refreshing means walking again (a remount).
//   - Zero-length "dir/" marker blobs and blobs carrying the metadata
//     hdi_isfolder=true (how accounts with a hierarchical namespace show
//     directories on the blob endpoint) are directories, not files.
//   - A blob name that cannot be a path ("a//b", "a/./b", "../x", a name
//     with a NUL) is skipped and counted in Stats().Skipped. When a name is
//     both a blob and a prefix of other blobs ("a" and "a/b"), the directory
//     wins and the blob is skipped and counted.
//
// Invariants:
//
//   - Versions are ETags without quotes. The service quotes ETags in
//     headers and not in listing XML (and Azurite is not consistent either);
//     every ETag is normalised on the way in and quoted again on the way out
//     (If-Match), so a version from List, Walk or Stat can be read with
//     ReadAt.
//   - Every ranged GET carries If-Match with the version asked for. A blob
//     replaced before or during a read fails the read with backend.ErrStale
//     (HTTP 412); a read never returns bytes of two versions. A large read is
//     split into BlockSize chunks fetched in parallel (at most Concurrency at
//     once per read), each pinned the same way.
//   - Retries, backoff and per-try timeouts are the SDK's retry policy,
//     tuned by Options; 408, 429, 500, 502, 503 and 504 are retried, with the
//     server's Retry-After honoured (capped by MaxRetryDelay). A body that
//     breaks mid-read is resumed by the SDK's retry reader, pinned to the
//     same ETag. Throttling that outlasts the retries surfaces as
//     backend.ErrThrottled.
//   - Secrets (account keys, SAS signatures, client secrets, tokens) never
//     appear in an error string, a log line, String() or Stats: errors from
//     the SDK are rebuilt from the status, the service's error code and the
//     request path, never from the request URL, which carries a SAS token.
package azblob
