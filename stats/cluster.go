package stats

import (
	"errors"
	"fmt"
	"math"
)

// Cluster systems: the caches Cluster predicts for.
const (
	// SystemPageCache is each node's kernel page cache modelled as pure LRU
	// of the node's cache budget (simulated, see ClusterInput.LRUSample).
	SystemPageCache = "page_cache_lru"
	// SystemMinIO is a stallfs MinIO cache per node (admit until full,
	// never evict), without peers.
	SystemMinIO = "minio"
	// SystemMinIOPeers is the MinIO caches of the nodes as one peer group:
	// every item has one owner, which alone caches it.
	SystemMinIOPeers = "minio_peers"
)

// Limits and defaults of ClusterInput.
const (
	// MaxClusterNodes and MaxClusterEpochs bound Nodes and Epochs.
	MaxClusterNodes  = 1024
	MaxClusterEpochs = 1000
	// DefaultLRUSample is the item count the LRU simulation scales a larger
	// dataset down to (same cache/dataset ratio).
	DefaultLRUSample = 100_000
	// DefaultChunkBytes is the item size cap (the mount's default chunk).
	DefaultChunkBytes = 4 << 20
)

// ClusterInput are the inputs of the cluster what-if. Sizes are bytes,
// rates bytes/s. All nodes are alike and read at the same time.
type ClusterInput struct {
	// DatasetBytes is D and Files is N; items are D/N bytes on average
	// (capped at ChunkBytes: a larger file is several chunk items).
	DatasetBytes int64 `json:"dataset_bytes"`
	Files        int64 `json:"files"`
	// CacheBytes is C, the cache budget of each node.
	CacheBytes int64 `json:"cache_bytes"`
	// Nodes is M, 1..MaxClusterNodes.
	Nodes int `json:"nodes"`
	// BackendRate is S, the backend's aggregate bandwidth shared by all
	// nodes: each node gets S/M.
	BackendRate float64 `json:"backend_rate"`
	// BackendLatencySeconds is the time to first byte of each backend
	// request (0: none).
	BackendLatencySeconds float64 `json:"backend_latency_seconds"`
	// Concurrency is how many backend requests a node keeps in flight
	// (loader workers, or readers); it only matters with a latency. 0: 1.
	Concurrency int `json:"concurrency"`
	// ConsumerRate is R, the bytes/s one node's GPUs ingest; 0: the
	// consumer does no work (every second of an epoch is fetch time).
	ConsumerRate float64 `json:"consumer_rate"`
	// CacheRate is the rate of local cache hits (0: free), and PeerRate the
	// inter-node bandwidth of one node (0: free).
	CacheRate float64 `json:"cache_rate"`
	PeerRate  float64 `json:"peer_rate"`
	// Epochs is E, 1..MaxClusterEpochs; every cache starts cold.
	Epochs int `json:"epochs"`
	// Distributed: a DistributedSampler deals each epoch's fresh global
	// permutation to the nodes, so each reads D/M, a different part every
	// epoch. Otherwise every node reads the whole dataset every epoch.
	Distributed bool `json:"distributed"`
	// Serial: fetch and consumption do not overlap (no prefetch, one
	// reader): stall = fetch time, epoch = fetch + consume. Otherwise they
	// overlap: epoch = max(fetch, consume), stall = epoch - consume.
	Serial bool `json:"serial"`
	// ChunkBytes caps the item size (0: DefaultChunkBytes).
	ChunkBytes int64 `json:"chunk_bytes"`
	// LRUSample is the largest item count the page cache is simulated
	// with (0: DefaultLRUSample); Seed seeds its permutations.
	LRUSample int    `json:"lru_sample"`
	Seed      uint64 `json:"seed"`
}

// ClusterEpoch is one epoch of one system, per node and for the cluster.
type ClusterEpoch struct {
	Epoch int `json:"epoch"`
	// ReadBytes is what one node reads (D, or D/M when distributed); it is
	// HitBytes (its own cache) + PeerBytes (from other nodes' caches or
	// their fills) + MissBytes (its own backend fills for its readers).
	ReadBytes int64 `json:"read_bytes"`
	HitBytes  int64 `json:"hit_bytes"`
	PeerBytes int64 `json:"peer_bytes"`
	MissBytes int64 `json:"miss_bytes"`
	// HitRatio is HitBytes / ReadBytes.
	HitRatio float64 `json:"hit_ratio"`
	// BackendBytes is one node's backend traffic (its fills, for its own
	// readers and for peers) and BackendBytesTotal the cluster's.
	BackendBytes      int64 `json:"backend_bytes"`
	BackendBytesTotal int64 `json:"backend_bytes_total"`
	// FetchSeconds is the time one node spends fetching (the what-if's T),
	// ConsumeSeconds D_node/R, StallSeconds the fetch stall and
	// EpochSeconds the epoch's wall time.
	FetchSeconds   float64 `json:"fetch_seconds"`
	ConsumeSeconds float64 `json:"consume_seconds"`
	StallSeconds   float64 `json:"stall_seconds"`
	EpochSeconds   float64 `json:"epoch_seconds"`
}

// ClusterSystem is the prediction for one system.
type ClusterSystem struct {
	System string         `json:"system"`
	Epochs []ClusterEpoch `json:"epochs"`
	// BackendBytesTotal and StallSeconds sum the epochs (cluster bytes,
	// one node's stall).
	BackendBytesTotal int64   `json:"backend_bytes_total"`
	StallSeconds      float64 `json:"stall_seconds"`
	// SampleItems is the item count the LRU was simulated with.
	SampleItems int `json:"sample_items,omitempty"`
}

// ClusterResult is Cluster's prediction.
type ClusterResult struct {
	Inputs ClusterInput `json:"inputs"`
	// ItemBytes is the mean item size, NodeBackendRate S/M.
	ItemBytes       float64         `json:"item_bytes"`
	NodeBackendRate float64         `json:"node_backend_rate"`
	Systems         []ClusterSystem `json:"systems"`
}

// ErrClusterInput marks inputs Cluster refuses.
var ErrClusterInput = errors.New("bad cluster what-if input")

func badCluster(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrClusterInput, fmt.Sprintf(format, a...))
}

// Validate checks in; errors satisfy errors.Is(err, ErrClusterInput).
func (in ClusterInput) Validate() error {
	switch {
	case in.DatasetBytes <= 0:
		return badCluster("dataset size %d: must be > 0", in.DatasetBytes)
	case in.Files <= 0 || in.Files > in.DatasetBytes:
		return badCluster("files %d: must be in 1..dataset bytes", in.Files)
	case in.CacheBytes < 0:
		return badCluster("cache %d: must be >= 0", in.CacheBytes)
	case in.Nodes < 1 || in.Nodes > MaxClusterNodes:
		return badCluster("nodes %d: must be in 1..%d", in.Nodes, MaxClusterNodes)
	case in.Distributed && in.Files < int64(in.Nodes):
		return badCluster("distributed over %d nodes needs at least as many files, not %d", in.Nodes, in.Files)
	case !(in.BackendRate > 0) || math.IsInf(in.BackendRate, 0):
		return badCluster("backend rate %v: must be > 0", in.BackendRate)
	case !(in.BackendLatencySeconds >= 0) || !(in.ConsumerRate >= 0) || !(in.CacheRate >= 0) || !(in.PeerRate >= 0):
		return badCluster("latency and rates must be >= 0")
	case in.Concurrency < 0:
		return badCluster("concurrency %d: must be >= 0", in.Concurrency)
	case in.Epochs < 1 || in.Epochs > MaxClusterEpochs:
		return badCluster("epochs %d: must be in 1..%d", in.Epochs, MaxClusterEpochs)
	case in.ChunkBytes < 0 || in.LRUSample < 0:
		return badCluster("chunk size and LRU sample must be >= 0")
	}
	return nil
}

// Cluster predicts, epoch by epoch, the backend bytes, fetch stall and
// epoch time of M alike nodes for three caches: the page cache (LRU), the
// MinIO cache alone and the MinIO caches as a peer group. docs/simulate.md
// states the model and its assumptions.
func Cluster(in ClusterInput) (ClusterResult, error) {
	if err := in.Validate(); err != nil {
		return ClusterResult{}, err
	}
	if in.ChunkBytes == 0 {
		in.ChunkBytes = DefaultChunkBytes
	}
	if in.LRUSample == 0 {
		in.LRUSample = DefaultLRUSample
	}
	if in.Concurrency == 0 {
		in.Concurrency = 1
	}
	m := clusterModel{in: in, D: float64(in.DatasetBytes), C: float64(in.CacheBytes), M: float64(in.Nodes)}
	m.item = math.Min(m.D/float64(in.Files), float64(in.ChunkBytes))
	m.read = m.D
	if in.Distributed {
		m.read = m.D / m.M
	}
	res := ClusterResult{Inputs: in, ItemBytes: m.item, NodeBackendRate: in.BackendRate / m.M}
	res.Systems = []ClusterSystem{m.pageCache(), m.minio(), m.peers()}
	return res, nil
}

// clusterModel holds the derived inputs (bytes as float64: the model's
// figures are expectations).
type clusterModel struct {
	in      ClusterInput
	D, C, M float64
	item    float64 // mean item bytes
	read    float64 // bytes one node reads per epoch
}

// split is one node's epoch: where its reads come from and its backend
// traffic.
type split struct {
	hit, peer, miss float64 // one node's reads by source
	backend         float64 // one node's backend fills
}

// pageCache simulates each node's LRU of C bytes (no peers).
func (m clusterModel) pageCache() ClusterSystem {
	ratios, n := simulateLRU(m.in)
	sys := ClusterSystem{System: SystemPageCache, SampleItems: n}
	for e, h := range ratios {
		hit := h * m.read
		sys.add(m.epoch(e+1, split{hit: hit, miss: m.read - hit, backend: m.read - hit}))
	}
	return sys
}

// minio is the no-eviction cache of each node alone: a node admits what
// it misses until C is full. A node that reads D/M of a fresh permutation
// hits its cached bytes c with probability c/D per byte.
func (m clusterModel) minio() ClusterSystem {
	sys := ClusterSystem{System: SystemMinIO}
	c := 0.0 // bytes cached per node
	for e := 1; e <= m.in.Epochs; e++ {
		hit := m.read * c / m.D
		miss := m.read - hit
		c = math.Min(math.Min(m.C, m.D), c+miss)
		sys.add(m.epoch(e, split{hit: hit, miss: miss, backend: miss}))
	}
	return sys
}

// peers is the MinIO caches as one group: each node owns D/M of the items
// and caches only its own (min(C, D/M) of them), so the group holds
// G = min(M*C, D) once the first epoch admitted it. An item the group
// does not hold is fetched by its owner for every read of it: once per
// epoch when distributed, once per node otherwise (in the first epoch the
// items that are admitted are fetched once).
func (m clusterModel) peers() ClusterSystem {
	sys := ClusterSystem{System: SystemMinIOPeers}
	full := math.Min(m.M*m.C, m.D) // G after the first epoch
	g := 0.0
	for e := 1; e <= m.in.Epochs; e++ {
		readers := m.M // nodes that read each item this epoch
		if m.in.Distributed {
			readers = 1
		}
		admitted := full - g // fetched once, then served from its owner's cache
		total := admitted + readers*(m.D-full)
		// A node's reads: 1/M of them are its own items, of which it holds
		// g/M of the D/M it owns; the rest come from their owners.
		own := m.read / m.M
		hit := own * g / m.D
		s := split{hit: hit, peer: m.read - own, miss: own - hit, backend: total / m.M}
		g = full
		sys.add(m.epoch(e, s))
	}
	return sys
}

// epoch times one node's epoch. The backend term is bandwidth- or
// latency-bound, max(B/(S/M), requests * (L + item/(S/M)) / concurrency);
// the peer term is P/PeerRate; both make up the miss rate of the
// DS-Analyzer what-if (WhatIf), which adds the cache term.
func (m clusterModel) epoch(n int, s split) ClusterEpoch {
	e := ClusterEpoch{
		Epoch: n, ReadBytes: round(m.read), HitBytes: round(s.hit), PeerBytes: round(s.peer),
		MissBytes: round(s.miss), BackendBytes: round(s.backend), BackendBytesTotal: round(s.backend * m.M),
		HitRatio: s.hit / m.read,
	}
	sNode := m.in.BackendRate / m.M
	tb := s.backend / sNode
	if l := m.in.BackendLatencySeconds; l > 0 {
		tb = math.Max(tb, s.backend/m.item*(l+m.item/sNode)/float64(m.in.Concurrency))
	}
	tMiss := tb
	if m.in.PeerRate > 0 {
		tMiss += s.peer / m.in.PeerRate
	}
	missBytes := m.read - s.hit
	rate := 1.0 // no miss: the backend rate does not matter
	if missBytes > 0 && tMiss > 0 {
		rate = missBytes / tMiss
	} else if missBytes > 0 {
		rate = math.Inf(1)
	}
	w := WhatIf(WhatIfInput{DatasetBytes: max(round(m.read), 1), CacheBytes: round(s.hit), CacheRate: m.in.CacheRate, BackendRate: rate})
	e.FetchSeconds = w.Rows[0].FetchSeconds
	if m.in.ConsumerRate > 0 {
		e.ConsumeSeconds = m.read / m.in.ConsumerRate
	}
	if m.in.Serial {
		e.EpochSeconds = e.FetchSeconds + e.ConsumeSeconds
		e.StallSeconds = e.FetchSeconds
	} else {
		e.EpochSeconds = math.Max(e.FetchSeconds, e.ConsumeSeconds)
		e.StallSeconds = e.EpochSeconds - e.ConsumeSeconds
	}
	return e
}

func (s *ClusterSystem) add(e ClusterEpoch) {
	s.Epochs = append(s.Epochs, e)
	s.BackendBytesTotal += e.BackendBytesTotal
	s.StallSeconds += e.StallSeconds
}

func round(v float64) int64 { return int64(math.Round(v)) }
