// Package local serves a directory on the local disk as a backend.Backend
// and backend.Walker.
//
// # Paths
//
// Paths are slash-separated and relative to the root given to New; "" (or
// ".") is the root itself. A path that is not an [iofs.ValidPath] (a ".."
// element, a leading slash, an empty element) is refused with an error
// satisfying iofs.ErrInvalid before the file system is touched.
//
// Lookups never leave the root: on Linux >= 5.6 every open goes through
// openat2(2) with RESOLVE_BENEATH relative to a descriptor of the root, so
// the kernel refuses any resolution that would escape it, even through
// symbolic links inside the path or a concurrent rename. Where openat2 is
// not available (older kernels, seccomp filters), and for absolute symbolic
// links (which RESOLVE_BENEATH rejects outright), the path is resolved with
// filepath.EvalSymlinks and the result checked to lie inside the root; that
// fallback is subject to a rename race between the check and the open.
//
// # Symbolic links
//
// List, Walk and Stat report a symbolic link as itself: an entry with
// iofs.ModeSymlink, its Target as os.Readlink returns it, and Size the
// length of the target; they never follow it (Walk does not descend into a
// linked directory). ReadAt on a link's path follows it when the fully
// resolved target is a regular file inside the root; a target outside the
// root is reported as not existing. The version checked by such a ReadAt
// is the version of the target file (what Stat of the target's path
// returns), since the link itself carries none.
//
// # Special files
//
// Devices, named pipes and sockets are not part of a dataset: List and Walk
// omit them and Stat and ReadAt report them as not existing, so a reader
// can never block on a FIFO.
//
// # Versions and staleness
//
// The version of a regular file is fmt.Sprintf("%x-%x", size,
// mtime.UnixNano()). ReadAt compares it with an fstat of the open file
// before reading and again after, and returns an error wrapping
// backend.ErrStale if either differs, so a file modified during a read
// never yields bytes of two versions. (A file replaced by rename during a
// read is read whole from the inode that was opened, which still has the
// requested version.)
//
// # Cancellation
//
// Every operation checks its context before each system call that may
// block on the disk; a single pread is not interrupted.
package local
