package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/stats"
)

// simulateCommand is `stallfs simulate`: the cluster what-if
// (stats.Cluster, docs/simulate.md), computed from flags alone.
func simulateCommand() *cli.Command {
	env := func(name string) []string { return []string{"STALLFS_SIMULATE_" + name} }
	return &cli.Command{
		Name:  "simulate",
		Usage: "predict backend bytes and fetch stall per epoch of a cluster: page cache, MinIO cache, MinIO cache with peers",
		UsageText: "stallfs simulate --dataset 140GiB --files 1281167 --cache 32GiB --nodes 64 " +
			"--backend-bandwidth 10GB/s --consumer-rate 1GB/s [--distributed] [--peer-bandwidth 1.25GB/s] [--json]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dataset", Usage: "dataset `SIZE` D (e.g. 140GiB)", EnvVars: env("DATASET")},
			&cli.Int64Flag{Name: "files", Usage: "file count `N` (items are D/N bytes on average)", EnvVars: env("FILES")},
			&cli.StringFlag{Name: "cache", Usage: "cache budget per node: a `SIZE` (32GiB) or a share of the dataset (25%)", EnvVars: env("CACHE")},
			&cli.IntFlag{Name: "nodes", Value: 1, Usage: "node count `M` (1..1024)", EnvVars: env("NODES")},
			&cli.StringFlag{Name: "backend-bandwidth", Usage: "the backend's aggregate `RATE`, shared by all nodes (e.g. 10GB/s)", EnvVars: env("BACKEND_BANDWIDTH")},
			&cli.StringFlag{Name: "backend-latency", Usage: "time to first byte of each backend request (`DURATION`, e.g. 20ms)", EnvVars: env("BACKEND_LATENCY")},
			&cli.IntFlag{Name: "concurrency", Value: 8, Usage: "backend requests in flight per node (`N` loader workers); matters with a latency", EnvVars: env("CONCURRENCY")},
			&cli.StringFlag{Name: "consumer-rate", Usage: "the `RATE` one node's GPUs ingest (default: infinite, the reader does no work)", EnvVars: env("CONSUMER_RATE")},
			&cli.StringFlag{Name: "peer-bandwidth", Usage: "inter-node `RATE` per node (default: free)", EnvVars: env("PEER_BANDWIDTH")},
			&cli.StringFlag{Name: "cache-rate", Usage: "the `RATE` of local cache hits (default: free)", EnvVars: env("CACHE_RATE")},
			&cli.IntFlag{Name: "epochs", Value: 3, Usage: "epochs `E` from a cold cache (1..1000)", EnvVars: env("EPOCHS")},
			&cli.BoolFlag{Name: "distributed", Usage: "DistributedSampler: each node reads D/M of a fresh global permutation per epoch (default: every node reads all of it)", EnvVars: env("DISTRIBUTED")},
			&cli.BoolFlag{Name: "serial", Usage: "fetch and consumption do not overlap (no prefetch): stall = fetch time", EnvVars: env("SERIAL")},
			&cli.StringFlag{Name: "chunk-size", Usage: "the mounts' chunk `SIZE`: larger files are several items (default 4MiB)", EnvVars: env("CHUNK_SIZE")},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "`SEED` of the page cache simulation's permutations", EnvVars: env("SEED")},
			&cli.BoolFlag{Name: "json", Usage: "print the prediction as JSON (docs/simulate.md)", EnvVars: env("JSON")},
		},
		Action: func(c *cli.Context) error {
			in, err := simulateParse(c)
			if err != nil {
				return err
			}
			res, err := stats.Cluster(in)
			if err != nil {
				return usagef("simulate: %w", err)
			}
			if c.Bool("json") {
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return fmt.Errorf("simulate: %w", err)
				}
				return nil
			}
			return writeSimulateText(c.App.Writer, res)
		},
	}
}

// simulateParse validates the flags into the model's input.
func simulateParse(c *cli.Context) (stats.ClusterInput, error) {
	in := stats.ClusterInput{Files: c.Int64("files"), Nodes: c.Int("nodes"), Concurrency: c.Int("concurrency"),
		Epochs: c.Int("epochs"), Distributed: c.Bool("distributed"), Serial: c.Bool("serial"), Seed: c.Uint64("seed"),
		LRUSample: stats.DefaultLRUSample}
	if c.NArg() > 0 {
		return in, usagef("simulate: unexpected argument %q (everything is a flag)", c.Args().First())
	}
	var err error
	if in.DatasetBytes, err = parseSize("dataset", c.String("dataset"), 1, math.MaxInt64); err != nil {
		return in, err
	}
	switch {
	case in.Files < 1 || in.Files > in.DatasetBytes:
		return in, usagef("--files %d: want 1..%d (at least a byte per file)", in.Files, in.DatasetBytes)
	case in.Nodes < 1 || in.Nodes > stats.MaxClusterNodes:
		return in, usagef("--nodes %d: want 1..%d", in.Nodes, stats.MaxClusterNodes)
	case in.Epochs < 1 || in.Epochs > stats.MaxClusterEpochs:
		return in, usagef("--epochs %d: want 1..%d", in.Epochs, stats.MaxClusterEpochs)
	case in.Concurrency < 1:
		return in, usagef("--concurrency %d: want >= 1", in.Concurrency)
	case in.Distributed && in.Files < int64(in.Nodes):
		return in, usagef("--distributed over %d nodes needs at least %d files, not %d", in.Nodes, in.Nodes, in.Files)
	}
	if in.CacheBytes, err = simulateCache(c.String("cache"), in.DatasetBytes); err != nil {
		return in, err
	}
	if c.String("backend-bandwidth") == "" {
		return in, usagef("--backend-bandwidth: a rate is required (the backend's aggregate, e.g. 10GB/s)")
	}
	rate, err := parseRate("backend-bandwidth", c.String("backend-bandwidth"))
	if err != nil {
		return in, err
	}
	in.BackendRate = float64(rate)
	for _, r := range []struct {
		flag string
		to   *float64
	}{{"consumer-rate", &in.ConsumerRate}, {"peer-bandwidth", &in.PeerRate}, {"cache-rate", &in.CacheRate}} {
		if s := c.String(r.flag); s != "" {
			v, err := parseRate(r.flag, s)
			if err != nil {
				return in, err
			}
			*r.to = float64(v)
		}
	}
	if s := c.String("backend-latency"); s != "" {
		d, err := parseDuration("backend-latency", s)
		if err != nil {
			return in, err
		}
		in.BackendLatencySeconds = d.Seconds()
	}
	if s := c.String("chunk-size"); s != "" {
		if in.ChunkBytes, err = parseSize("chunk-size", s, 1, 1<<40); err != nil {
			return in, err
		}
	}
	return in, nil
}

// simulateCache parses --cache: a size, or a share of the dataset d.
func simulateCache(s string, d int64) (int64, error) {
	if s == "" {
		return 0, usagef("--cache: a size (32GiB) or a share of the dataset (25%%) is required")
	}
	if p, ok := strings.CutSuffix(strings.TrimSpace(s), "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v >= 0) || v > 100_000 {
			return 0, usagef("--cache %q: want a share such as 25%%", s)
		}
		return int64(math.Round(v / 100 * float64(d))), nil
	}
	return parseSize("cache", s, 0, math.MaxInt64)
}

// writeSimulateText prints the inputs and one table row per system and
// epoch.
func writeSimulateText(w io.Writer, r stats.ClusterResult) error {
	in := r.Inputs
	size := func(v int64) string { return humanize.IBytes(uint64(max(v, 0))) }
	rate := func(v float64) string { return humanize.SIWithDigits(v, 3, "B/s") }
	reads := "every node reads the whole dataset"
	if in.Distributed {
		reads = "DistributedSampler: each node reads D/M of a fresh permutation"
	}
	consumer := "no consumer work (R infinite)"
	if in.ConsumerRate > 0 {
		consumer = "consumer " + rate(in.ConsumerRate) + " per node"
	}
	overlap := "fetch overlaps consumption"
	if in.Serial {
		overlap = "fetch then consume (serial)"
	}
	fmt.Fprintf(w, "dataset %s in %s files (items of %s), %d node(s), cache %s per node (%.1f%% of the dataset)\n",
		size(in.DatasetBytes), humanize.Comma(in.Files), size(int64(r.ItemBytes)), in.Nodes, size(in.CacheBytes),
		100*float64(in.CacheBytes)/float64(in.DatasetBytes))
	lat := ""
	if in.BackendLatencySeconds > 0 {
		lat = fmt.Sprintf(", %s latency, %d requests in flight per node", humanize.FtoaWithDigits(in.BackendLatencySeconds*1000, 3)+"ms", in.Concurrency)
	}
	peer := "peer network free"
	if in.PeerRate > 0 {
		peer = "peer network " + rate(in.PeerRate) + " per node"
	}
	fmt.Fprintf(w, "backend %s shared (%s per node)%s; %s; %s; %s; %s\n\n",
		rate(in.BackendRate), rate(r.NodeBackendRate), lat, peer, consumer, reads, overlap)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "SYSTEM\tEPOCH\tHIT\tPEER\tBACKEND/NODE\tBACKEND TOTAL\tFETCH\tSTALL\tEPOCH TIME\t\n")
	for _, s := range r.Systems {
		for _, e := range s.Epochs {
			peer := "-"
			if e.PeerBytes > 0 {
				peer = size(e.PeerBytes)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.System, e.Epoch, 100*e.HitRatio, peer,
				size(e.BackendBytes), size(e.BackendBytesTotal), simSecs(e.FetchSeconds), simSecs(e.StallSeconds), simSecs(e.EpochSeconds))
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("simulate: %w", err)
	}
	fmt.Fprintln(w)
	for _, s := range r.Systems {
		note := ""
		if s.SampleItems > 0 {
			note = fmt.Sprintf(" (LRU simulated on %s items)", humanize.Comma(int64(s.SampleItems)))
		}
		fmt.Fprintf(w, "%-15s %d epochs: backend %s in all, %s of fetch stall per node%s\n", s.System, len(s.Epochs),
			size(s.BackendBytesTotal), simSecs(s.StallSeconds), note)
	}
	return nil
}

// simSecs formats seconds with 3 significant digits (whole seconds from 100).
func simSecs(v float64) string {
	if v >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64) + "s"
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + "s"
}
