package peers

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Fetch asks the live owner of the item for its itemLen bytes. It returns
// ErrNotPeer when this member owns it. Any failure is returned (the caller
// reads the backend instead); a peer that fails to connect, times out or
// refuses our token is marked down. Fetch returns within the item timeout
// or when ctx ends.
func (g *Group) Fetch(ctx context.Context, path, version string, chunk, itemLen int64) ([]byte, error) {
	i := g.ownerOf(path, version, chunk)
	if i == g.self {
		return nil, ErrNotPeer
	}
	m := g.members[i]
	ctx, cancel := context.WithTimeout(ctx, g.o.ItemTimeout)
	defer cancel()
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("peer %s: wait for a request slot: %w", m.addr, ctx.Err())
	}
	defer func() { <-m.sem }()
	m.requests.Add(1)
	data, err := g.fetch(ctx, m, path, version, chunk, itemLen)
	if err != nil {
		m.failures.Add(1)
		return nil, err
	}
	m.bytes.Add(int64(len(data)))
	return data, nil
}

// failed marks m down after a transport error or timeout, unless the
// caller gave up: that says nothing about the peer.
func (g *Group) failed(ctx context.Context, m *member, err error) {
	if errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	g.markDown(m, err)
}

func (g *Group) fetch(ctx context.Context, m *member, path, version string, chunk, itemLen int64) ([]byte, error) {
	q := url.Values{"path": {path}, "version": {version}, "chunk": {strconv.FormatInt(chunk, 10)}}
	resp, err := g.do(ctx, m, "/v1/item?"+q.Encode())
	if err != nil {
		g.failed(ctx, m, err)
		return nil, fmt.Errorf("peer %s: %w", m.addr, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		g.markDown(m, errors.New(resp.Status))
		return nil, fmt.Errorf("peer %s refused our token: %s", m.addr, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("peer %s: item %s#%d: %s", m.addr, path, chunk, resp.Status)
	case resp.ContentLength != itemLen:
		return nil, fmt.Errorf("peer %s: item %s#%d: %d bytes, want %d", m.addr, path, chunk, resp.ContentLength, itemLen)
	}
	want, err := strconv.ParseUint(resp.Header.Get(CRCHeader), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("peer %s: item %s#%d: no checksum", m.addr, path, chunk)
	}
	data := make([]byte, itemLen)
	if _, err := io.ReadFull(resp.Body, data); err != nil {
		g.failed(ctx, m, err)
		return nil, fmt.Errorf("peer %s: item %s#%d: %w", m.addr, path, chunk, err)
	}
	if got := crc32.Checksum(data, castagnoli); got != uint32(want) {
		m.badCRC.Add(1)
		return nil, fmt.Errorf("peer %s: item %s#%d: checksum %08x, want %08x", m.addr, path, chunk, got, want)
	}
	return data, nil
}

// do sends an authenticated GET of target to m.
func (g *Group) do(ctx context.Context, m *member, target string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.addr+target, nil)
	if err != nil {
		return nil, err
	}
	sign(req, g.o.Secret, time.Now())
	return g.client.Do(req)
}

// PeerStats is one peer's health and traffic, seen from this member.
type PeerStats struct {
	Addr         string    `json:"addr"`
	Up           bool      `json:"up"`
	DownSince    time.Time `json:"down_since,omitzero"`
	Requests     int64     `json:"requests"`
	Failures     int64     `json:"failures"`
	Bytes        int64     `json:"bytes"`
	BadChecksums int64     `json:"bad_checksums"`
	// CacheBytes is the cache budget the peer reported (-1: not known
	// yet, or not reported).
	CacheBytes int64 `json:"cache_bytes"`
}

// ServedStats counts what this member served to the others.
type ServedStats struct {
	Requests     int64 `json:"requests"`
	Bytes        int64 `json:"bytes"`
	Unauthorized int64 `json:"unauthorized"`
	Rejected     int64 `json:"rejected"`
	Misdirected  int64 `json:"misdirected"`
	Failed       int64 `json:"failed"`
}

// Stats is a snapshot of the group as seen from this member.
type Stats struct {
	Self string `json:"self"`
	// CacheBytes is this member's cache budget (Options.CacheBytes).
	CacheBytes int64       `json:"cache_bytes"`
	Live       int         `json:"live"`
	Peers      []PeerStats `json:"peers"`
	Served     ServedStats `json:"served"`
}

// Stats returns a snapshot of the peers' health and traffic.
func (g *Group) Stats() Stats {
	s := Stats{Self: g.o.Self, CacheBytes: g.o.CacheBytes, Live: 1, Peers: []PeerStats{}}
	for _, m := range g.members {
		if m == nil {
			continue
		}
		ps := PeerStats{
			Addr:         m.addr,
			Up:           m.up.Load(),
			Requests:     m.requests.Load(),
			Failures:     m.failures.Load(),
			Bytes:        m.bytes.Load(),
			BadChecksums: m.badCRC.Load(),
			CacheBytes:   m.budget.Load(),
		}
		if ns := m.downSince.Load(); ns != 0 {
			ps.DownSince = time.Unix(0, ns).UTC()
		}
		if ps.Up {
			s.Live++
		}
		s.Peers = append(s.Peers, ps)
	}
	s.Served = ServedStats{
		Requests:     g.srv.requests.Load(),
		Bytes:        g.srv.bytes.Load(),
		Unauthorized: g.srv.unauthorized.Load(),
		Rejected:     g.srv.rejected.Load(),
		Misdirected:  g.srv.misdirected.Load(),
		Failed:       g.srv.failed.Load(),
	}
	return s
}
