package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/throttle"
	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/mincache"
	"github.com/stallfs/stallfs/prefetch"
	"github.com/stallfs/stallfs/stats"
)

// pipelineFlags are the mount flags of the read path's layers: the MinIO
// cache, stats and metrics, epoch-order prefetch, and the benchmarking
// throttle of the backend.
func pipelineFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "cache-mem", Value: "auto", Usage: "memory tier `SIZE` (auto: a quarter of the available memory; 0: none)", EnvVars: []string{"STALLFS_CACHE_MEM"}},
		&cli.StringFlag{Name: "cache-disk", Usage: "disk tier `SIZE` (needs --cache-dir; default with --cache-dir: 80% of its free space)", EnvVars: []string{"STALLFS_CACHE_DISK"}},
		&cli.StringFlag{Name: "cache-dir", Usage: "`DIR` of the persistent disk tier (shared by mounts of different sources)", EnvVars: []string{"STALLFS_CACHE_DIR"}},
		&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics on `HOST:PORT`", EnvVars: []string{"STALLFS_METRICS_ADDR"}},
		&cli.StringFlag{Name: "backend-latency", Usage: "benchmarking aid: add `DURATION` before every backend read's first byte", EnvVars: []string{"STALLFS_BACKEND_LATENCY"}},
		&cli.StringFlag{Name: "backend-bandwidth", Usage: "benchmarking aid: limit the backend to `RATE` (e.g. 200MB/s), shared by all requests", EnvVars: []string{"STALLFS_BACKEND_BANDWIDTH"}},
		&cli.IntFlag{Name: "prefetch-ahead", Usage: "most files the prefetcher runs ahead of the reader (0: 512)", EnvVars: []string{"STALLFS_PREFETCH_AHEAD"}},
		&cli.StringFlag{Name: "prefetch-buffer", Value: "256MiB", Usage: "`SIZE` of the staging buffer for prefetched items the cache cannot take", EnvVars: []string{"STALLFS_PREFETCH_BUFFER"}},
		&cli.IntFlag{Name: "prefetch-concurrency", Usage: "most files fetched ahead at once (0: 16)", EnvVars: []string{"STALLFS_PREFETCH_CONCURRENCY"}},
		&cli.IntFlag{Name: "prefetch-next-epoch", Usage: "most files of the next epoch fetched before the reader is in it (0: the prefetch concurrency; -1: up to --prefetch-ahead)", EnvVars: []string{"STALLFS_PREFETCH_NEXT_EPOCH"}},
	}, append(append(orderFlags(), peerFlags()...), metadataFlags()...)...)
}

// pipelineConfig is the validated configuration of the read path's layers.
type pipelineConfig struct {
	MemBytes     int64
	MemAuto      bool // MemBytes was derived from the available memory
	DiskBytes    int64
	CacheDir     string
	MetricsAddr  string
	Latency      time.Duration
	Bandwidth    int64 // bytes per second, 0 = unlimited
	Order        *prefetch.Spec
	Ahead        int
	StageBytes   int64
	PrefetchConc int
	NextEpoch    int         // prefetch.Options.NextEpochAhead
	Peers        *peerConfig // nil: no peer group
	// MetadataCache persists the tree in CacheDir (--metadata-cache).
	MetadataCache bool
}

// readPipelineConfig validates the pipeline flags; bf holds the cache
// settings of a blobfuse2 --config-file (nil: none), used for flags not
// given explicitly. Every error is a usage error.
func readPipelineConfig(c *cli.Context, bf *blobfuse2Mount) (pipelineConfig, error) {
	var p pipelineConfig
	var err error
	mem, disk, dir := c.String("cache-mem"), c.String("cache-disk"), c.String("cache-dir")
	if bf != nil {
		if !c.IsSet("cache-mem") && bf.MemBytes > 0 {
			mem = strconv.FormatInt(bf.MemBytes, 10)
		}
		if !c.IsSet("cache-disk") && bf.DiskBytes > 0 {
			disk = strconv.FormatInt(bf.DiskBytes, 10)
		}
		if !c.IsSet("cache-dir") && bf.CacheDir != "" {
			dir = bf.CacheDir
		}
	}
	if strings.EqualFold(mem, "auto") || mem == "" {
		p.MemBytes, p.MemAuto = autoMemBudget(), true
	} else if p.MemBytes, err = parseSize("cache-mem", mem, 0, 1<<50); err != nil {
		return p, err
	}
	if dir != "" {
		if p.CacheDir, err = filepath.Abs(dir); err != nil {
			return p, usagef("--cache-dir %q: %w", dir, err)
		}
		st, err := os.Stat(p.CacheDir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.MkdirAll(p.CacheDir, 0o700); err != nil {
				return p, usagef("--cache-dir %q: %w", dir, pathErrCause(err))
			}
		case err != nil:
			return p, usagef("--cache-dir %q: %w", dir, pathErrCause(err))
		case !st.IsDir():
			return p, usagef("--cache-dir %q is not a directory", dir)
		}
	}
	if disk != "" {
		if p.DiskBytes, err = parseSize("cache-disk", disk, 0, 1<<56); err != nil {
			return p, err
		}
		if p.DiskBytes > 0 && p.CacheDir == "" {
			return p, usagef("--cache-disk %s needs --cache-dir", disk)
		}
	} else if p.CacheDir != "" {
		var sfs unix.Statfs_t
		if err := unix.Statfs(p.CacheDir, &sfs); err == nil {
			p.DiskBytes = int64(sfs.Bavail) * int64(sfs.Bsize) * 8 / 10
		}
	}
	p.MetadataCache = c.Bool("metadata-cache")
	p.MetricsAddr = c.String("metrics-addr")
	if p.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(p.MetricsAddr); err != nil {
			return p, usagef("--metrics-addr %q: want HOST:PORT", p.MetricsAddr)
		}
	}
	if s := c.String("backend-latency"); s != "" {
		if p.Latency, err = parseDuration("backend-latency", s); err != nil {
			return p, err
		}
	}
	if s := c.String("backend-bandwidth"); s != "" {
		if p.Bandwidth, err = parseRate("backend-bandwidth", s); err != nil {
			return p, err
		}
	}
	if p.StageBytes, err = parseSize("prefetch-buffer", c.String("prefetch-buffer"), 0, 1<<40); err != nil {
		return p, err
	}
	p.Ahead, p.PrefetchConc = c.Int("prefetch-ahead"), c.Int("prefetch-concurrency")
	if p.Ahead < 0 || p.PrefetchConc < 0 {
		return p, usagef("--prefetch-ahead and --prefetch-concurrency must be >= 0")
	}
	if p.NextEpoch = c.Int("prefetch-next-epoch"); p.NextEpoch < -1 {
		return p, usagef("--prefetch-next-epoch must be >= -1")
	}
	if c.String("order") != "" {
		spec, err := parseOrderSpec(c)
		if err != nil {
			return p, err
		}
		p.Order = &spec
	}
	if p.Peers, err = readPeerConfig(c); err != nil {
		return p, err
	}
	return p, nil
}

// parseRate parses a rate such as "200MB/s" or "1GiB" (per second).
func parseRate(flag, s string) (int64, error) {
	v := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	n, err := parseSize(flag, v, 1, 1<<50)
	if err != nil {
		return 0, usagef("--%s: malformed rate %q (examples: 100MB/s, 1GiB/s)", flag, s)
	}
	return n, nil
}

// autoMemBudget is the default memory tier: a quarter of the memory
// available now, rounded down to a MiB.
func autoMemBudget() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 1 << 30
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024 / 4 &^ (1<<20 - 1)
		}
	}
	return 1 << 30
}

// pipeline is the read path's layers of one mount, built around fs.New.
type pipeline struct {
	cfg   pipelineConfig
	log   *slog.Logger
	cache *mincache.Cache // nil without any tier
	reg   *prometheus.Registry
	rec   *stats.Recorder
	pf    *prefetch.Prefetcher
	thr   *throttle.Backend
	peer  *peerSetup // nil without a peer group
	meta  metadataSetting
	mount *fs.Mount // set by beforeMount

	metrics *http.Server
	stop    context.CancelFunc
	done    chan struct{}
}

// newPipeline wraps b with the throttle when asked and opens the cache.
func newPipeline(cfg pipelineConfig, b backend.Backend, log *slog.Logger) (*pipeline, backend.Backend, error) {
	p := &pipeline{cfg: cfg, log: log, reg: prometheus.NewRegistry(), meta: newMetadataSetting(cfg, b)}
	// The daemon's own health beside the data path's: go_goroutines,
	// go_memstats_*, go_gc_* (from the runtime). Not the process
	// collector: each scrape would read /proc files and add to the
	// daemon's rchar, which benchmarks and tests use as an independent
	// count of the bytes it read (RSS and fds are in /proc/PID anyway).
	p.reg.MustRegister(collectors.NewGoCollector())
	tf, err := readTestFaults(os.Getenv) // faultflags.go: a testing aid
	if err != nil {
		return nil, nil, err
	}
	if cfg.Latency > 0 || cfg.Bandwidth > 0 || tf.on() {
		p.thr = throttle.New(b, throttle.Options{Latency: cfg.Latency, BytesPerSec: cfg.Bandwidth, Fault: tf.Fault, Timeout: tf.Timeout})
		b = p.thr
		log.Warn("backend throttled (benchmarking aid)", "latency", cfg.Latency, "bandwidth", humanize.IBytes(uint64(cfg.Bandwidth))+"/s", "faults", tf.Spec, "timeout", tf.Timeout)
	}
	if cfg.MemBytes > 0 || cfg.DiskBytes > 0 {
		c, err := mincache.Open(mincache.Options{
			MemBytes:  cfg.MemBytes,
			DiskBytes: cfg.DiskBytes,
			Dir:       cfg.CacheDir,
			Source:    b.String(),
			Logger:    log.With("component", "mincache"),
		})
		if err != nil {
			if errors.Is(err, mincache.ErrLocked) {
				return nil, nil, usagef("--cache-dir %q: %w", cfg.CacheDir, err)
			}
			return nil, nil, fmt.Errorf("open cache: %w", err)
		}
		p.cache = c
		info := c.Info()
		log.Info("cache", "memory", humanize.IBytes(uint64(cfg.MemBytes)), "memory_auto", cfg.MemAuto,
			"disk", humanize.IBytes(uint64(cfg.DiskBytes)), "dir", cfg.CacheDir,
			"disk_items", info.Disk.Items, "disk_used", humanize.IBytes(uint64(max(info.Disk.UsedBytes, 0))))
	}
	return p, b, nil
}

// apply sets the fs options that the pipeline owns.
func (p *pipeline) apply(o *fs.Options) {
	if p.cache != nil {
		o.Cache = p.cache
	}
	if p.cfg.Order != nil && p.cfg.StageBytes > 0 {
		o.BufferBytes = p.cfg.StageBytes
	}
	o.BeforeMount = p.beforeMount
	p.meta.apply(o)
}

// beforeMount runs once the tree is known and before the kernel sees the
// mount: it builds the stats recorder, the prefetcher and the control
// endpoints.
func (p *pipeline) beforeMount(m *fs.Mount) error {
	p.mount = m
	var budget int64
	if p.cache != nil {
		budget = p.cfg.MemBytes + p.cfg.DiskBytes
	}
	p.rec = stats.New(stats.Options{
		Registry:     p.reg,
		Files:        m.Files(),
		DatasetBytes: m.DatasetBytes(),
		CacheBytes:   budget,
		PathOf:       m.PathOf,
		SizeOf:       m.SizeOf,
		CacheFill:    p.cacheFill,
		Logger:       p.log.With("component", "stats"),
	})
	m.SetRecorder(p.rec)
	if p.thr != nil {
		// Counted below the read path: an independent check of
		// stallfs_read_bytes_total{source="backend"}.
		p.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stallfs_throttle_read_bytes_total",
			Help: "Bytes the throttled backend returned (only with --backend-latency or --backend-bandwidth).",
		}, func() float64 { return float64(p.thr.Counters().ReadBytes) }))
	}
	m.Handle("GET /v1/stats", http.HandlerFunc(p.serveStats))
	m.Handle("POST /v1/epoch", http.HandlerFunc(p.serveEpoch))
	m.Handle("GET /v1/cache", http.HandlerFunc(p.serveCacheInfo))
	m.Handle("POST /v1/cache/drop", http.HandlerFunc(p.serveCacheDrop))
	if p.cfg.Order != nil {
		if err := p.startPrefetch(m); err != nil {
			return err
		}
	}
	m.Handle("GET /v1/order", http.HandlerFunc(p.serveOrder))
	m.Handle("POST /v1/order", http.HandlerFunc(p.serveOrderSet))
	if err := p.startPeers(m); err != nil {
		return err
	}
	if p.cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", p.cfg.MetricsAddr)
		if err != nil {
			return usagef("--metrics-addr %s: %w", p.cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{}))
		p.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = p.metrics.Serve(ln) }()
		p.log.Info("metrics", "addr", ln.Addr().String())
	}
	return nil
}

// startPrefetch builds the layout from the mounted tree and starts the
// prefetcher.
func (p *pipeline) startPrefetch(m *fs.Mount) error {
	spec := *p.cfg.Order
	layout, err := prefetch.BuildLayout(spec, m.TreeFS())
	if err != nil {
		return usagef("--layout: %w", err)
	}
	readers, err := prefetch.BuildReaders(spec, layout.Len())
	if err != nil {
		return usagef("--order: %w", err)
	}
	ahead := max(p.cfg.StageBytes*3/4, 1)
	p.pf = prefetch.NewReaders(layout, readers, m, prefetch.Options{
		Ahead:          p.cfg.Ahead,
		AheadBytes:     ahead,
		Concurrency:    p.cfg.PrefetchConc,
		NextEpochAhead: p.cfg.NextEpoch,
		Logger:         p.log.With("component", "prefetch"),
	})
	m.SetObserver(p.pf)
	ctx, cancel := context.WithCancel(context.Background())
	p.stop, p.done = cancel, make(chan struct{})
	go func() {
		defer close(p.done)
		if err := p.pf.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			p.log.Warn("prefetcher stopped", "err", err)
		}
	}()
	p.log.Info("prefetch", "layout", spec.Layout, "order", spec.Order, "files", layout.Len(), "readers", len(readers))
	return nil
}

// close stops the prefetcher and the metrics server and closes the cache
// (its disk index is flushed). Call it after the mount is gone.
func (p *pipeline) close() {
	p.peer.close()
	if p.stop != nil {
		p.stop()
		p.pf.Close()
		<-p.done
	}
	if p.metrics != nil {
		_ = p.metrics.Close()
	}
	if p.cache != nil {
		if err := p.cache.Close(); err != nil {
			p.log.Warn("close cache", "err", err)
		}
	}
}

func (p *pipeline) cacheFill() []stats.TierFill {
	if p.cache == nil {
		return nil
	}
	in := p.cache.Info()
	return []stats.TierFill{
		{Tier: "memory", UsedBytes: in.Memory.UsedBytes, BudgetBytes: in.Memory.BudgetBytes, Items: in.Memory.Items},
		{Tier: "disk", UsedBytes: in.Disk.UsedBytes, BudgetBytes: in.Disk.BudgetBytes, Items: in.Disk.Items},
	}
}

// mountStats is GET /v1/stats: the stats snapshot plus the prefetcher's
// own view when it runs.
type mountStats struct {
	stats.Snapshot
	Prefetcher *prefetch.Stats `json:"prefetcher,omitempty"`
	Peers      *peerStats      `json:"peers,omitempty"`
}

func (p *pipeline) serveStats(w http.ResponseWriter, r *http.Request) {
	files, err := stats.TopFilesParam(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := mountStats{Snapshot: p.rec.Snapshot(files), Peers: p.peer.stats()}
	if p.pf != nil {
		st := p.pf.Stats()
		out.Prefetcher = &st
		fillPrefetch(&out.Snapshot.Prefetch, st)
	}
	writeJSON(w, out)
}

// fillPrefetch adds the prefetcher's hidden and not-hidden misses to the
// stats document's prefetch section.
func fillPrefetch(dst *stats.Prefetch, st prefetch.Stats) {
	var hidden, late, notIssued, fetched int64
	for _, rd := range st.Readers {
		for _, e := range rd.Epochs {
			hidden += e.Hidden
			late += e.Late
			notIssued += e.NotIssued
			fetched += e.Fetched
		}
	}
	dst.HiddenMisses = hidden
	dst.NotHiddenMisses = late + notIssued
	if dst.FetchedItems == 0 {
		dst.FetchedItems = fetched
	}
}

func (p *pipeline) serveEpoch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Epoch int `json:"epoch"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&body); err != nil || body.Epoch < 0 {
		http.Error(w, `want {"epoch": N} with N >= 0`, http.StatusBadRequest)
		return
	}
	p.rec.SetEpoch(body.Epoch)
	writeJSON(w, body)
}

// cacheInfo is GET /v1/cache.
type cacheInfo struct {
	Enabled bool           `json:"enabled"`
	Info    *mincache.Info `json:"info,omitempty"`
}

func (p *pipeline) serveCacheInfo(w http.ResponseWriter, r *http.Request) {
	out := cacheInfo{Enabled: p.cache != nil}
	if p.cache != nil {
		in := p.cache.Info()
		out.Info = &in
	}
	writeJSON(w, out)
}

func (p *pipeline) serveCacheDrop(w http.ResponseWriter, r *http.Request) {
	if p.cache == nil {
		http.Error(w, "this mount has no cache", http.StatusConflict)
		return
	}
	if err := p.cache.Drop(); err != nil {
		http.Error(w, "drop: "+err.Error(), http.StatusInternalServerError)
		return
	}
	// With --kernel-cache the kernel's copies of the dropped items go at
	// once (each would otherwise go at its file's next LOOKUP).
	if p.mount != nil {
		p.mount.DropKernelCache()
	}
	p.log.Info("cache dropped (control socket)")
	p.serveCacheInfo(w, r)
}

func (p *pipeline) serveOrder(w http.ResponseWriter, r *http.Request) {
	if p.pf == nil {
		http.Error(w, "this mount has no order (mount with --order, or POST /v1/order)", http.StatusConflict)
		return
	}
	q := r.URL.Query()
	epoch, limit := 0, 0
	var err error
	if v := q.Get("epoch"); v != "" {
		if epoch, err = strconv.Atoi(v); err != nil || epoch < 0 {
			http.Error(w, "epoch: want an integer >= 0", http.StatusBadRequest)
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 0 {
			http.Error(w, "limit: want an integer >= 0", http.StatusBadRequest)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := p.pf.WriteOrder(w, q.Get("reader"), epoch, limit); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}

func (p *pipeline) serveOrderSet(w http.ResponseWriter, r *http.Request) {
	if p.pf == nil {
		http.Error(w, "this mount was started without --order; remount with --order to prefetch", http.StatusConflict)
		return
	}
	var spec prefetch.Spec
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&spec); err != nil {
		http.Error(w, "order: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := p.pf.Apply(spec); err != nil {
		http.Error(w, "order: "+err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, p.pf.Stats())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
