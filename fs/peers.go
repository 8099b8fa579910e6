package fs

import (
	"context"
	"fmt"
	iofs "io/fs"
	"sync/atomic"

	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/stats"
)

// Peers is the mount's view of its peer group (peers.Group implements it):
// who owns an item, and a way to get it from its owner. Implementations
// must be safe for concurrent use.
type Peers interface {
	// Remote reports whether another live member owns the item.
	Remote(path, version string, chunk int64) bool
	// Fetch returns the item's itemLen bytes from its owner, verified. It
	// must return within a bounded time, whatever the peer does; any
	// error makes the read path use the backend instead.
	Fetch(ctx context.Context, path, version string, chunk, itemLen int64) ([]byte, error)
}

// PeerOptions are the read path's peer settings. The zero value works.
type PeerOptions struct {
	// CacheOthers lets this mount admit items that another member owns
	// (off: only the owner caches an item, so the group's caches hold
	// disjoint items and together cover the most of the dataset).
	CacheOthers bool
}

// peerState is the read path's peer hook and its counters.
type peerState struct {
	// set before mount only
	peers       Peers
	cacheOthers bool

	bytes     atomic.Int64 // item bytes got from peers
	fallbacks atomic.Int64 // peer fetches that failed; the backend served
	backend   atomic.Int64 // item bytes read from the backend
}

// SetPeers makes the read path ask the owner peer for items that another
// member owns, between the local tiers and the backend. It may be called
// only from Options.BeforeMount, before any read.
func (m *Mount) SetPeers(p Peers, o PeerOptions) {
	m.rd.peer.peers = p
	m.rd.peer.cacheOthers = o.CacheOthers
}

// PeerCounters are the read path's counts of where filled items came from.
type PeerCounters struct {
	// PeerBytes is the item bytes fetched from owner peers.
	PeerBytes int64 `json:"peer_bytes"`
	// PeerFallbacks is the peer fetches that failed and were read from
	// the backend instead.
	PeerFallbacks int64 `json:"peer_fallbacks"`
	// BackendBytes is the item bytes read from the backend, for this
	// mount's readers, its prefetcher and the peers it serves.
	BackendBytes int64 `json:"backend_bytes"`
}

// PeerCounters returns the read path's fill counters.
func (m *Mount) PeerCounters() PeerCounters {
	p := &m.rd.peer
	return PeerCounters{PeerBytes: p.bytes.Load(), PeerFallbacks: p.fallbacks.Load(), BackendBytes: p.backend.Load()}
}

// admits reports whether a filled item may be offered to the cache: a
// non-owner keeps other owners' items out unless told otherwise, also when
// it read one from the backend because the owner failed to serve it. Once
// the owner is marked down, another live member (maybe this one) owns the
// item.
func (r *reader) admits(key mincache.Key) bool {
	p := r.peer.peers
	return p == nil || r.peer.cacheOthers || !p.Remote(key.Path, key.Version, key.Chunk)
}

// load reads the whole item for a fill: from its owner when another live
// member owns it, else, or when the peer fails, from the backend under a
// fill slot. A peer fetch holds no fill slot, so members waiting on each
// other cannot exhaust each other's slots.
func (r *reader) load(key mincache.Key, itemLen int64) ([]byte, stats.Source, error) {
	if p := r.peer.peers; p != nil && p.Remote(key.Path, key.Version, key.Chunk) {
		data, err := p.Fetch(r.life, key.Path, key.Version, key.Chunk, itemLen)
		if err == nil && int64(len(data)) == itemLen {
			r.peer.bytes.Add(itemLen)
			return data, stats.Peer, nil
		}
		// Counted, not logged: the group logs a peer going down once.
		r.peer.fallbacks.Add(1)
	}
	select {
	case r.sem <- struct{}{}:
	case <-r.life.Done():
		return nil, stats.Backend, errClosed
	}
	defer func() { <-r.sem }()
	buf := make([]byte, itemLen)
	if err := r.fetch(key, buf); err != nil {
		r.errs.log(r.o.log, key, err)
		return nil, stats.Backend, err
	}
	r.peer.backend.Add(itemLen)
	return buf, stats.Backend, nil
}

// ServeItem returns the whole item chunk of the file at path (relative to
// the source root) if that file is part of the dataset at version: from
// the cache, or through the same shared fill as reads, which admits it by
// the cache's rule (this mount owns it). It implements peers.ItemSource.
// An item that is not part of the dataset is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func (m *Mount) ServeItem(ctx context.Context, path, version string, chunk int64) ([]byte, error) {
	id, ok := m.FileID(path)
	if !ok {
		return nil, fmt.Errorf("serve %s: %w", path, iofs.ErrNotExist)
	}
	f := m.fileRef(id)
	r := m.rd
	items := int64(1)
	if f.size > r.o.chunk {
		items = (f.size + r.o.chunk - 1) / r.o.chunk
	}
	if f.version != version || chunk < 0 || chunk >= items {
		return nil, fmt.Errorf("serve %s@%s#%d: %w", path, version, chunk, iofs.ErrNotExist)
	}
	key, ilen := r.key(&f, chunk), r.itemLen(&f, chunk)
	buf := make([]byte, ilen)
	for range 2 {
		if r.o.cache != nil {
			if _, _, ok := r.o.cache.ReadAt(key, buf, 0); ok {
				return buf, nil
			}
		}
		if r.recent.copyOut(key, buf, 0) {
			return buf, nil
		}
		res, err := r.fill(ctx, key, ilen, false)
		if err != nil {
			return nil, err
		}
		if res.buf != nil {
			return res.buf, nil
		}
		// Cached by another flight meanwhile: read it there.
	}
	return nil, fmt.Errorf("serve %s#%d: item vanished from the cache", path, chunk)
}
