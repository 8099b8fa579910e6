package stats

import (
	"github.com/prometheus/client_golang/prometheus"
)

// collector exposes the recorder's counters to Prometheus. It reads the
// same shards as Snapshot at scrape time, so the hot path keeps no second
// set of counters and the two views agree.
type collector struct {
	r                    *Recorder
	descReadBytes        *prometheus.Desc
	descReads            *prometheus.Desc
	descStall            *prometheus.Desc
	descStallWall        *prometheus.Desc
	descLatency          *prometheus.Desc
	descCacheUsed        *prometheus.Desc
	descCacheBudget      *prometheus.Desc
	descRequests         *prometheus.Desc
	descErrors           *prometheus.Desc
	descRetries          *prometheus.Desc
	descEpoch            *prometheus.Desc
	descPrefetchBytes    *prometheus.Desc
	descPrefetchItems    *prometheus.Desc
	descPrefetchHits     *prometheus.Desc
	descPrefetchHitBytes *prometheus.Desc
}

// newCollector returns the collector of r's counters.
func newCollector(r *Recorder) *collector {
	return &collector{
		r: r,
		descReadBytes: prometheus.NewDesc("stallfs_read_bytes_total",
			"Bytes read through the mount, by the source that served them.", []string{"source"}, nil),
		descReads: prometheus.NewDesc("stallfs_reads_total",
			"Read item-parts served, by source.", []string{"source"}, nil),
		descStall: prometheus.NewDesc("stallfs_fetch_stall_seconds_total",
			"Time readers waited for data that was in no cache tier, summed over readers.", nil, nil),
		descStallWall: prometheus.NewDesc("stallfs_fetch_stall_wall_seconds_total",
			"Wall-clock time during which at least one reader waited for data.", nil, nil),
		descLatency: prometheus.NewDesc("stallfs_read_latency_seconds",
			"Time each read item-part waited for its data (0 for cache hits).", nil, nil),
		descCacheUsed: prometheus.NewDesc("stallfs_cache_used_bytes",
			"Bytes admitted to a cache tier.", []string{"tier"}, nil),
		descCacheBudget: prometheus.NewDesc("stallfs_cache_budget_bytes",
			"Byte budget of a cache tier.", []string{"tier"}, nil),
		descRequests: prometheus.NewDesc("stallfs_backend_requests_total",
			"Backend requests made.", nil, nil),
		descErrors: prometheus.NewDesc("stallfs_backend_errors_total",
			"Backend requests that failed.", nil, nil),
		descRetries: prometheus.NewDesc("stallfs_backend_retries_total",
			"Backend requests that retried a failed one.", nil, nil),
		descEpoch: prometheus.NewDesc("stallfs_epoch",
			"Number of the current epoch.", nil, nil),
		descPrefetchBytes: prometheus.NewDesc("stallfs_prefetch_bytes_total",
			"Bytes fetched from the backend by the prefetcher.", nil, nil),
		descPrefetchItems: prometheus.NewDesc("stallfs_prefetch_items_total",
			"Items fetched from the backend by the prefetcher.", nil, nil),
		descPrefetchHits: prometheus.NewDesc("stallfs_prefetch_hits_total",
			"Reads served from a prefetched item (misses hidden from the reader).", nil, nil),
		descPrefetchHitBytes: prometheus.NewDesc("stallfs_prefetch_hit_bytes_total",
			"Bytes of reads served from a prefetched item.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.descReadBytes, c.descReads, c.descStall, c.descStallWall,
		c.descLatency, c.descCacheUsed, c.descCacheBudget, c.descRequests, c.descErrors, c.descRetries,
		c.descEpoch, c.descPrefetchBytes, c.descPrefetchItems, c.descPrefetchHits, c.descPrefetchHitBytes} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	r := c.r
	tot := r.sum()
	for s := range numSources {
		ch <- prometheus.MustNewConstMetric(c.descReadBytes, prometheus.CounterValue, float64(tot.bytes[s]), s.String())
		ch <- prometheus.MustNewConstMetric(c.descReads, prometheus.CounterValue, float64(tot.reads[s]), s.String())
	}
	ch <- prometheus.MustNewConstMetric(c.descStall, prometheus.CounterValue, secs(tot.stallNs))
	ch <- prometheus.MustNewConstMetric(c.descStallWall, prometheus.CounterValue, secs(tot.busyNs))
	buckets := make(map[float64]uint64, numBuckets-1)
	var cum int64
	for i := range numBuckets - 1 { // the last bucket is +Inf
		cum += tot.hist[i]
		buckets[bucketUpper(i)] = uint64(cum)
	}
	ch <- prometheus.MustNewConstHistogram(c.descLatency, uint64(tot.totalReads()), secs(tot.stallNs), buckets)
	if r.opts.CacheFill != nil {
		for _, t := range r.opts.CacheFill() {
			ch <- prometheus.MustNewConstMetric(c.descCacheUsed, prometheus.GaugeValue, float64(t.UsedBytes), t.Tier)
			ch <- prometheus.MustNewConstMetric(c.descCacheBudget, prometheus.GaugeValue, float64(t.BudgetBytes), t.Tier)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.descRequests, prometheus.CounterValue, float64(r.requests.Load()))
	ch <- prometheus.MustNewConstMetric(c.descErrors, prometheus.CounterValue, float64(r.errors.Load()))
	ch <- prometheus.MustNewConstMetric(c.descRetries, prometheus.CounterValue, float64(r.retries.Load()))
	ch <- prometheus.MustNewConstMetric(c.descEpoch, prometheus.GaugeValue, float64(r.epochNum.Load()))
	ch <- prometheus.MustNewConstMetric(c.descPrefetchBytes, prometheus.CounterValue, float64(tot.prefetchBytes))
	ch <- prometheus.MustNewConstMetric(c.descPrefetchItems, prometheus.CounterValue, float64(tot.prefetchFetches))
	ch <- prometheus.MustNewConstMetric(c.descPrefetchHits, prometheus.CounterValue, float64(tot.prefetchHits))
	ch <- prometheus.MustNewConstMetric(c.descPrefetchHitBytes, prometheus.CounterValue, float64(tot.prefetchHitBytes))
}
