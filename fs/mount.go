package fs

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stallfs/stallfs/backend"
)

// Options configures a mount. The zero value works.
type Options struct {
	// KernelCache selects the kernel-cache hit path: OPEN is answered
	// ENOSYS, so the kernel opens files without asking (no OPEN, FLUSH or
	// RELEASE round trips) and keeps their pages; the daemon invalidates
	// the pages of every item no cache tier holds (at the file's next
	// LOOKUP, or sooner once more than BufferBytes of them are held), so
	// the kernel keeps only what the tiers hold and backend bytes per
	// epoch stay D minus cached. Regular files get the entry timeout
	// KernelCacheEntryTimeout, so each open sends one LOOKUP, which stands
	// for the open: the prefetcher's Observe and the stats' hit of a file
	// the tiers hold are done there (a stat() counts too). A kernel
	// without zero-message opens (FUSE_NO_OPEN_SUPPORT) gets direct I/O.
	// Off by default: every read reaches the daemon with direct I/O, and
	// the stats count every read exactly.
	KernelCache bool
	// KernelCacheEntryTimeout is the entry timeout of regular files with
	// KernelCache (0: none, every open sends a LOOKUP). A positive one
	// saves that round trip, but opens within it reach neither the
	// prefetcher nor the stats, nor drop pages of non-tier items read
	// meanwhile (the budget of BufferBytes still does).
	KernelCacheEntryTimeout time.Duration
	// AllowOther lets users other than the mounter access the mount.
	AllowOther bool
	// ReadAhead is the kernel's maximum readahead in bytes (0: default).
	// It matters only with KernelCache.
	ReadAhead int64
	// EntryTimeout and AttrTimeout are how long the kernel may cache names
	// and attributes (0: one hour). The dataset is read once at mount and
	// never changes during a run; a changed source is picked up by
	// remounting.
	EntryTimeout, AttrTimeout time.Duration
	// ChunkSize is the size of a cache item of a large file (0: 4 MiB).
	// Files up to this size are one item.
	ChunkSize int64
	// FsName is shown in /proc/mounts as the source (empty: backend String()).
	FsName string
	// Logger receives the mount's logs (nil: discard).
	Logger *slog.Logger
	// Debug logs every FUSE request.
	Debug bool

	// Cache is consulted before the backend and offered every fetched
	// item (nil: no cache).
	Cache Cache
	// Recorder receives every read's source, size and blocked time (nil:
	// none).
	Recorder Recorder
	// MaxFills bounds concurrent backend item reads (0: 64).
	MaxFills int
	// ReadaheadChunks is how many chunks after the current one a
	// sequential reader of a large file fetches ahead (0: 2; negative:
	// none).
	ReadaheadChunks int
	// Retries is how often a failed backend read is retried before the
	// read fails with EIO (0: 3; negative: never). Missing, stale and
	// short reads are not retried.
	Retries int
	// RetryBackoff is the wait before the first retry, doubled for each
	// next one (0: 10ms).
	RetryBackoff time.Duration
	// BufferBytes bounds the recently fetched items that the cache did not
	// take, kept to serve an item's remaining parts and readahead (0: 64
	// MiB).
	BufferBytes int64
	// ListParallel bounds concurrent List calls while the tree is read at
	// mount, for backends without a Walker (0: 16).
	ListParallel int
	// ControlSocket is the path of the control socket (empty: derived from
	// the mountpoint, see ControlSocketPath).
	ControlSocket string
	// BeforeMount, if set, is called once the tree is read and before the
	// kernel mount, so that parts sized by the dataset (stats, prefetch)
	// can be built from Files, TreeFS and PathOf and plugged in with
	// SetCache, SetRecorder and Handle. An error aborts New.
	BeforeMount func(m *Mount) error
	// MetadataFile, if set, is where the listed tree is persisted so that
	// a remount of an unchanged source need not list it again. Empty: list
	// at every mount.
	//
	// A file that is missing, damaged, truncated, of another format or of
	// another source (Backend.String) is ignored with a log line and the
	// source is listed. A valid file is used as follows. With directory
	// times (MetadataDirTimes, or a backend implementing DirTimesBackend)
	// every directory is stated and the file is used only if all still
	// have their listed modification time; a file rewritten in place
	// changes no directory and is caught by the backend's version check
	// at read (ErrStale: EIO). Otherwise (object stores) the mount serves
	// the file's tree at once and lists the source again in the
	// background, under the ctx given to New: a difference is logged as a
	// warning with counts and persisted for the next mount, reads of
	// changed objects fail as stale, and the live tree is not changed
	// (remount to see the changes). Each listing is written to a unique
	// temporary name and renamed, so concurrent mounts never interleave.
	MetadataFile string
	// MetadataDirTimes says that the source's directory modification
	// times change whenever an entry is added, removed or renamed in them
	// (a local file system), for backends that do not say so themselves.
	MetadataDirTimes bool
}

func (o Options) withDefaults() Options {
	if o.EntryTimeout <= 0 {
		o.EntryTimeout = time.Hour
	}
	if o.AttrTimeout <= 0 {
		o.AttrTimeout = time.Hour
	}
	if o.ChunkSize <= 0 {
		o.ChunkSize = 4 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxFills <= 0 {
		o.MaxFills = 64
	}
	if o.ReadaheadChunks == 0 {
		o.ReadaheadChunks = 2
	}
	if o.Retries == 0 {
		o.Retries = 3
	}
	if o.Retries < 0 {
		o.Retries = 0
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 10 * time.Millisecond
	}
	if o.BufferBytes <= 0 {
		o.BufferBytes = 64 << 20
	}
	if o.ListParallel <= 0 {
		o.ListParallel = 16
	}
	return o
}

func (o Options) readerOptions() readerOptions {
	return readerOptions{
		chunk:     o.ChunkSize,
		maxFills:  o.MaxFills,
		readahead: max(o.ReadaheadChunks, 0),
		retries:   o.Retries,
		backoff:   o.RetryBackoff,
		buffer:    o.BufferBytes,
		cache:     o.Cache,
		recorder:  o.Recorder,
		log:       o.Logger,
	}
}

// maxRead is the largest FUSE read request; go-fuse caps it to what the
// kernel allows (1 MiB with the default max_pages_limit).
const maxRead = 1 << 20

// Mount is a mounted stallfs file system.
type Mount struct {
	// immutable after New
	mountpoint string
	source     string
	opts       Options
	log        *slog.Logger
	tree       *tree
	rd         *reader
	server     *fuse.Server
	ctl        *controlServer
	started    time.Time
	cancel     context.CancelFunc
	uid, gid   uint32
	observer   Observer // set in BeforeMount only
	kc         *kcache  // KernelCache only, see kcache.go
	root       *dirNode

	unmountOnce sync.Once
	unmountErr  error
}

// New reads the whole tree of b, mounts it read-only at mountpoint and
// returns once the kernel serves the mount. ctx bounds the setup only; the
// mount lives until Unmount.
func New(ctx context.Context, mountpoint string, b backend.Backend, opts Options) (*Mount, error) {
	opts = opts.withDefaults()
	abs, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, fmt.Errorf("mountpoint %s: %w", mountpoint, err)
	}
	if err := CheckMountpoint(abs); err != nil {
		return nil, err
	}
	t, err := readTree(ctx, b, opts)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", b, err)
	}
	life, cancel := context.WithCancel(context.Background())
	m := &Mount{
		mountpoint: abs,
		source:     b.String(),
		opts:       opts,
		log:        opts.Logger,
		tree:       t,
		started:    time.Now(),
		cancel:     cancel,
		uid:        uint32(os.Getuid()),
		gid:        uint32(os.Getgid()),
	}
	m.rd = newReader(life, b, opts.readerOptions())
	if opts.KernelCache {
		m.kc = newKcache(opts)
	}
	sock := opts.ControlSocket
	if sock == "" {
		if sock, err = derivedSocketPath(abs, true); err != nil {
			cancel()
			return nil, err
		}
	}
	if m.ctl, err = startControl(sock, m); err != nil {
		cancel()
		return nil, err
	}
	if opts.BeforeMount != nil {
		if err := opts.BeforeMount(m); err != nil {
			m.ctl.close()
			cancel()
			m.rd.close()
			return nil, fmt.Errorf("mount %s: %w", abs, err)
		}
	}
	fsName := opts.FsName
	if fsName == "" {
		fsName = b.String()
	}
	neg := opts.EntryTimeout
	gopts := &gofs.Options{
		MountOptions: fuse.MountOptions{
			FsName:       fsName,
			Name:         "stallfs",
			AllowOther:   opts.AllowOther,
			DirectMount:  true,
			MaxReadAhead: int(min(opts.ReadAhead, maxRead)),
			MaxWrite:     maxRead,
			Debug:        opts.Debug,
			Options:      []string{"ro"},
			// Replies come from memory, never from a file descriptor:
			// splicing them through a pipe only adds a copy (and warns
			// when fs.pipe-max-size is below a 1 MiB read).
			DisableSplice: true,
			// READDIR carries each entry's type, which is all a walk
			// needs; READDIRPLUS would look up every listed entry and
			// give it a go-fuse node (readdir.go).
			DisableReadDirPlus: true,
			Logger:             slog.NewLogLogger(opts.Logger.Handler(), goFuseLogLevel(opts.Debug)),
		},
		EntryTimeout:    &opts.EntryTimeout,
		AttrTimeout:     &opts.AttrTimeout,
		NegativeTimeout: &neg,
		UID:             m.uid,
		GID:             m.gid,
		RootStableAttr:  &gofs.StableAttr{Ino: dirIno(0)},
	}
	if m.kc != nil {
		// Entry timeouts are set per entry (regular files differ). With
		// READDIRPLUS a listing would look up, that is open, every
		// listed file: it stays off (above).
		gopts.EntryTimeout = nil
	}
	m.root = &dirNode{m: m, dir: 0}
	m.server, err = gofs.Mount(abs, m.root, gopts)
	if err != nil {
		m.ctl.close()
		cancel()
		m.rd.close()
		return nil, fmt.Errorf("mount %s: %w", abs, err)
	}
	if m.kc != nil {
		m.kc.decide(m.server.KernelSettings().Flags64())
	}
	m.log.Info("mounted", "source", m.source, "mountpoint", abs, "files", t.files(), "bytes", t.bytes, "control", sock)
	return m, nil
}

// goFuseLogLevel is the level of go-fuse's own log lines: its request
// trace with Debug, else its rare warnings.
func goFuseLogLevel(debug bool) slog.Level {
	if debug {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}

// Wait blocks until the file system is unmounted and the kernel has let go
// of it (after a lazy unmount, when the last open file is closed).
func (m *Mount) Wait() { m.server.Wait() }

// Unmount unmounts the file system and releases its resources. With files
// still open it detaches the mount lazily: the name disappears at once and
// the kernel releases the mount when the last file is closed. It stops all
// backend fills and removes the control socket. Calling it again returns
// the first result.
func (m *Mount) Unmount() error {
	m.unmountOnce.Do(func() {
		if err := m.server.Unmount(); err != nil {
			m.log.Debug("unmount busy, detaching lazily", "err", err)
			if err := ForceUnmount(m.mountpoint); err != nil {
				// Unmounted from outside (umount, fusermount -u) is fine.
				if mounted, merr := IsMountpoint(m.mountpoint); merr != nil || mounted {
					m.unmountErr = fmt.Errorf("unmount %s: %w", m.mountpoint, err)
				}
			}
		}
		m.kc.stop()
		m.cancel()
		m.rd.close()
		m.ctl.close()
		m.log.Info("unmounted", "mountpoint", m.mountpoint)
	})
	return m.unmountErr
}

// SetCache sets the cache of the read path. It may be called only from
// Options.BeforeMount, before any read.
func (m *Mount) SetCache(c Cache) { m.rd.o.cache = c }

// SetRecorder sets the read path's Recorder. It may be called only from
// Options.BeforeMount, before any read.
func (m *Mount) SetRecorder(r Recorder) { m.rd.o.recorder = r }

// Mountpoint returns the absolute path the file system is mounted at.
func (m *Mount) Mountpoint() string { return m.mountpoint }

// Files returns the number of regular files of the dataset.
func (m *Mount) Files() int { return m.tree.files() }

// DatasetBytes returns the total size of the dataset's regular files.
func (m *Mount) DatasetBytes() int64 { return m.tree.bytes }

// PathOf returns the slash-separated path, relative to the source root, of
// the regular file with ID id. IDs are dense, 0..Files()-1, in the byte
// order of the paths. It returns "" for an ID out of range.
func (m *Mount) PathOf(id uint32) string {
	if int(id) >= m.tree.files() {
		return ""
	}
	return m.tree.pathOf(m.tree.fileEnt[id])
}

// SizeOf returns the size of the file with ID id (-1 out of range). It is
// cheap and lock-free.
func (m *Mount) SizeOf(id uint32) int64 {
	if int(id) >= m.tree.files() {
		return -1
	}
	return m.tree.ents[m.tree.fileEnt[id]].size
}

// FileID returns the ID of the regular file at path p (slash-separated,
// relative to the source root).
func (m *Mount) FileID(p string) (uint32, bool) {
	e, ok := m.tree.lookupPath(p)
	if !ok || !m.tree.ents[e].mode.IsRegular() {
		return 0, false
	}
	return m.tree.ents[e].ref, true
}

// Handle registers h on the control socket's server for pattern (as
// http.ServeMux does). It may be called while the mount serves.
func (m *Mount) Handle(pattern string, h http.Handler) { m.ctl.mux.Handle(pattern, h) }

// ControlSocket returns the path of this mount's control socket.
func (m *Mount) ControlSocket() string { return m.ctl.path }
