// Package s3 is the backend.Backend of Amazon S3 and S3-compatible stores
// (MinIO, Ceph RGW, versitygw, Cloudflare R2, ...), on aws-sdk-go-v2.
//
// Invariants:
//
//   - Credentials come only from the SDK's default chain (environment,
//     shared config and profiles, SSO, web identity, container and
//     instance roles) or are absent (Options.NoSignRequest). Nothing here
//     reads or logs a secret, and no error carries one.
//   - A version is the object's ETag without quotes, everywhere: in
//     entries, in If-Match headers (sent quoted), in comparisons.
//   - Every ranged GET is pinned with If-Match. A 412, or a response whose
//     ETag differs (a store that ignores If-Match), is backend.ErrStale and
//     the read returns no bytes; a read never mixes two versions.
//   - ReadAt never returns fewer bytes than asked without an error: a body
//     cut short is asked for again from where it broke (bounded by
//     Options.MaxRetries); a range past the end is io.EOF, after a HEAD with
//     If-Match tells it from a shorter replacement.
//   - SDK errors are translated where they enter (errors.go) into the io/fs
//     family and the backend sentinels; transport failures that outlive
//     the retries keep their message but not their errno chain.
//   - List, Stat and Walk agree on one tree: a key that cannot be a path
//     (empty segment, ".", "..", NUL, a name over 255 bytes) is skipped
//     and counted; a name that is both an object and a prefix is the file.
//   - Walk reports the keys of one flat paginated listing of the subtree,
//     in its order, whether it lists them flat or (ListConcurrency > 1)
//     level by level with a delimiter and then prefix by prefix in
//     parallel (flat again when the prefixes prove tiny); it reports each
//     directory once and relies on S3's byte-ordered listing only to hide
//     keys below a file. A failed listing of any prefix fails the whole
//     walk: no partial tree.
package s3
