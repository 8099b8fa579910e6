package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/peers"
)

// peerCollector exports the peer group's counters and health to
// Prometheus, read from the group's Stats at scrape time. The only label
// is peer, a member's listen address as it appears in the member list.
type peerCollector struct {
	snap func() (peers.Stats, fs.PeerCounters)

	up, received, requests, failures, badCRC       *prometheus.Desc
	live, peerBytes, fallbacks, backendBytes       *prometheus.Desc
	servedReq, servedBytes, unauthorized, rejected *prometheus.Desc
	misdirected, servedFailed                      *prometheus.Desc
}

// newPeerCollector builds the collector over snap, which returns the
// group's view and this mount's fill counters.
func newPeerCollector(snap func() (peers.Stats, fs.PeerCounters)) *peerCollector {
	perPeer := []string{"peer"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc("stallfs_peer_"+name, help, labels, nil)
	}
	return &peerCollector{
		snap:         snap,
		up:           d("up", "1 while the peer is live in this member's view, 0 while it is marked down.", perPeer),
		received:     d("received_bytes_total", "Item bytes this mount received from the peer, verified.", perPeer),
		requests:     d("requests_total", "Item requests this mount sent to the peer.", perPeer),
		failures:     d("request_failures_total", "Item requests to the peer that failed (the backend served them).", perPeer),
		badCRC:       d("bad_checksums_total", "Items from the peer refused for a checksum mismatch.", perPeer),
		live:         d("live_members", "Members of the group live in this member's view, this one included.", nil),
		peerBytes:    d("fill_bytes_total", "Item bytes this mount's fills got from owner peers.", nil),
		fallbacks:    d("fill_fallbacks_total", "Peer fetches that failed and were read from the backend in the same fill.", nil),
		backendBytes: d("backend_bytes_total", "Item bytes this mount read from its backend (its readers, prefetcher and the peers it serves).", nil),
		servedReq:    d("served_requests_total", "Item requests this mount served to other members.", nil),
		servedBytes:  d("served_bytes_total", "Item bytes this mount served to other members.", nil),
		unauthorized: d("unauthorized_total", "Requests from other members refused with 401 (no, stale or wrong token).", nil),
		rejected:     d("rejected_total", "Authenticated item requests refused as malformed or not in the dataset (400, 404).", nil),
		misdirected:  d("misdirected_total", "Item requests refused because this member thinks another one owns the item (421).", nil),
		servedFailed: d("served_failures_total", "Item requests this mount could not serve because its fill failed (503).", nil),
	}
}

// Describe implements prometheus.Collector.
func (c *peerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.received, c.requests, c.failures, c.badCRC, c.live,
		c.peerBytes, c.fallbacks, c.backendBytes, c.servedReq, c.servedBytes, c.unauthorized,
		c.rejected, c.misdirected, c.servedFailed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *peerCollector) Collect(ch chan<- prometheus.Metric) {
	st, fills := c.snap()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, p := range st.Peers {
		up := 0.0
		if p.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, p.Addr)
		counter(c.received, p.Bytes, p.Addr)
		counter(c.requests, p.Requests, p.Addr)
		counter(c.failures, p.Failures, p.Addr)
		counter(c.badCRC, p.BadChecksums, p.Addr)
	}
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(st.Live))
	counter(c.peerBytes, fills.PeerBytes)
	counter(c.fallbacks, fills.PeerFallbacks)
	counter(c.backendBytes, fills.BackendBytes)
	counter(c.servedReq, st.Served.Requests)
	counter(c.servedBytes, st.Served.Bytes)
	counter(c.unauthorized, st.Served.Unauthorized)
	counter(c.rejected, st.Served.Rejected)
	counter(c.misdirected, st.Served.Misdirected)
	counter(c.servedFailed, st.Served.Failed)
}
