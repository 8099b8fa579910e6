package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/peers"
)

// TestPeerMetrics: the collector exports the group's Stats under
// stallfs_peer_*, labelled only by the member's listen address, and passes
// the pedantic registry's consistency checks.
func TestPeerMetrics(t *testing.T) {
	st := peers.Stats{
		Self: "127.0.0.1:7071", Live: 2,
		Peers: []peers.PeerStats{
			{Addr: "127.0.0.1:7072", Up: true, Requests: 7, Failures: 1, Bytes: 7000, BadChecksums: 1},
			{Addr: "127.0.0.1:7073", Up: false, Requests: 3, Failures: 3},
		},
		Served: peers.ServedStats{Requests: 11, Bytes: 11000, Unauthorized: 4, Rejected: 2, Misdirected: 1, Failed: 5},
	}
	fills := fs.PeerCounters{PeerBytes: 7000, PeerFallbacks: 4, BackendBytes: 123456}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newPeerCollector(func() (peers.Stats, fs.PeerCounters) { return st, fills }))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() != "peer" {
					t.Errorf("%s: label %s, want only peer", name, l.GetName())
				}
				name += "{" + l.GetValue() + "}"
			}
			if c := m.GetCounter(); c != nil {
				got[name] = c.GetValue()
			} else {
				got[name] = m.GetGauge().GetValue()
			}
		}
	}
	for name, want := range map[string]float64{
		"stallfs_peer_up{127.0.0.1:7072}":                     1,
		"stallfs_peer_up{127.0.0.1:7073}":                     0,
		"stallfs_peer_received_bytes_total{127.0.0.1:7072}":   7000,
		"stallfs_peer_requests_total{127.0.0.1:7073}":         3,
		"stallfs_peer_request_failures_total{127.0.0.1:7073}": 3,
		"stallfs_peer_bad_checksums_total{127.0.0.1:7072}":    1,
		"stallfs_peer_live_members":                           2,
		"stallfs_peer_fill_bytes_total":                       7000,
		"stallfs_peer_fill_fallbacks_total":                   4,
		"stallfs_peer_backend_bytes_total":                    123456,
		"stallfs_peer_served_requests_total":                  11,
		"stallfs_peer_served_bytes_total":                     11000,
		"stallfs_peer_unauthorized_total":                     4,
		"stallfs_peer_rejected_total":                         2,
		"stallfs_peer_misdirected_total":                      1,
		"stallfs_peer_served_failures_total":                  5,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if _, ok := got["stallfs_peer_up{127.0.0.1:7071}"]; ok {
		t.Errorf("this member exported as its own peer")
	}
}
