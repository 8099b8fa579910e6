package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/prefetch"
)

// orderCommand is `stallfs order show|set|compute`.
func orderCommand() *cli.Command {
	epoch := &cli.IntFlag{Name: "epoch", Usage: "`EPOCH` (0-based)", EnvVars: []string{"STALLFS_ORDER_EPOCH"}}
	limit := &cli.IntFlag{Name: "limit", Usage: "print at most `N` paths (0: all)", EnvVars: []string{"STALLFS_ORDER_LIMIT"}}
	reader := &cli.StringFlag{Name: "reader", Usage: "the reader `NAME` when several ranks share the mount (e.g. \"rank 3\"; default: the first)", EnvVars: []string{"STALLFS_ORDER_READER"}}
	return &cli.Command{
		Name:  "order",
		Usage: "show, set or compute the epoch order the prefetcher predicts",
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "print the predicted paths of an epoch, one per line, relative to the mount root",
				ArgsUsage: "MOUNTPOINT",
				Flags:     []cli.Flag{epoch, limit, reader},
				Action:    orderShow,
			},
			{
				Name:      "set",
				Usage:     "set the order of a running mount (e.g. from a launcher script)",
				ArgsUsage: "MOUNTPOINT",
				Flags:     append(orderFlags(), epoch),
				Action:    orderSet,
			},
			{
				Name:      "compute",
				Usage:     "print the order of an epoch over any directory, without a mount",
				ArgsUsage: "DIR",
				Flags:     append(orderFlags(), epoch, limit),
				Action:    orderCompute,
			},
		},
	}
}

// orderFlags are the flags that describe a layout and an order; `stallfs
// mount` reuses them. Each has an STALLFS_ variable; --rank and
// --world-size also read torch's RANK and WORLD_SIZE.
func orderFlags() []cli.Flag {
	env := func(names ...string) []string { return names }
	return []cli.Flag{
		&cli.StringFlag{Name: "order", Usage: "`ORDER`: sequential, torch-random, torch-distributed, torch-global, list or dali-file", EnvVars: env("STALLFS_ORDER")},
		&cli.Int64Flag{Name: "seed", Usage: "the job's `SEED` (Generator().manual_seed, DistributedSampler seed, or torch.manual_seed for torch-global)", EnvVars: env("STALLFS_SEED")},
		&cli.IntFlag{Name: "world-size", Usage: "DistributedSampler num_replicas `N`", EnvVars: env("STALLFS_WORLD_SIZE", "WORLD_SIZE")},
		&cli.IntFlag{Name: "rank", Usage: "DistributedSampler `RANK`", EnvVars: env("STALLFS_RANK", "RANK")},
		&cli.StringFlag{Name: "ranks", Usage: "every rank reading through this mount, e.g. `0-7` or 0,1,2,3 (one node of several ranks; replaces --rank)", EnvVars: env("STALLFS_RANKS")},
		&cli.BoolFlag{Name: "drop-last", Usage: "DistributedSampler drop_last=True", EnvVars: env("STALLFS_DROP_LAST")},
		&cli.BoolFlag{Name: "shuffle", Value: true, Usage: "DistributedSampler shuffle (--shuffle=false for shuffle=False)", EnvVars: env("STALLFS_SHUFFLE")},
		&cli.IntFlag{Name: "num-samples", Usage: "RandomSampler num_samples `N` (0: the dataset size)", EnvVars: env("STALLFS_NUM_SAMPLES")},
		&cli.BoolFlag{Name: "replacement", Usage: "RandomSampler replacement=True", EnvVars: env("STALLFS_REPLACEMENT")},
		&cli.StringFlag{Name: "torch-version", Usage: "PyTorch `VERSION` whose randperm to reproduce (e.g. 1.13, 2.6, 2.7; default: current)", EnvVars: env("STALLFS_TORCH_VERSION")},
		&cli.StringFlag{Name: "rng-state", Usage: "`FILE` holding torch.get_rng_state() taken right before iter(loader), raw (.numpy().tofile) or hex (torch-global)", EnvVars: env("STALLFS_RNG_STATE")},
		&cli.BoolFlag{Name: "persistent-workers", Usage: "DataLoader persistent_workers=True (torch-global)", EnvVars: env("STALLFS_PERSISTENT_WORKERS")},
		&cli.StringFlag{Name: "layout", Value: prefetch.LayoutImageFolder, Usage: "`LAYOUT`: imagefolder, sorted, dali-root, list:FILE or dali-list:FILE", EnvVars: env("STALLFS_LAYOUT")},
		&cli.StringFlag{Name: "layout-root", Usage: "dataset root `DIR` inside the mount (default: the mount root)", EnvVars: env("STALLFS_LAYOUT_ROOT")},
		&cli.StringFlag{Name: "layout-extensions", Usage: "comma-separated file `EXTENSIONS` (default: the layout's, e.g. torchvision IMG_EXTENSIONS)", EnvVars: env("STALLFS_LAYOUT_EXTENSIONS")},
		&cli.IntFlag{Name: "dali-shard-id", Usage: "DALI shard_id", EnvVars: env("STALLFS_DALI_SHARD_ID")},
		&cli.IntFlag{Name: "dali-num-shards", Usage: "DALI num_shards", EnvVars: env("STALLFS_DALI_NUM_SHARDS")},
		&cli.BoolFlag{Name: "dali-random-shuffle", Usage: "DALI random_shuffle=True", EnvVars: env("STALLFS_DALI_RANDOM_SHUFFLE")},
		&cli.BoolFlag{Name: "dali-shuffle-after-epoch", Usage: "DALI shuffle_after_epoch=True", EnvVars: env("STALLFS_DALI_SHUFFLE_AFTER_EPOCH")},
		&cli.BoolFlag{Name: "dali-stick-to-shard", Usage: "DALI stick_to_shard=True", EnvVars: env("STALLFS_DALI_STICK_TO_SHARD")},
		&cli.BoolFlag{Name: "dali-checkpointing", Usage: "DALI pipeline enable_checkpointing=True", EnvVars: env("STALLFS_DALI_CHECKPOINTING")},
	}
}

// parseOrderSpec reads orderFlags into a prefetch.Spec and checks it; bad
// values are usage errors (exit status 2).
func parseOrderSpec(c *cli.Context) (prefetch.Spec, error) {
	s := prefetch.Spec{
		Layout:            c.String("layout"),
		Root:              c.String("layout-root"),
		Order:             c.String("order"),
		Seed:              c.Int64("seed"),
		HasSeed:           c.IsSet("seed"),
		WorldSize:         c.Int("world-size"),
		Rank:              c.Int("rank"),
		DropLast:          c.Bool("drop-last"),
		NoShuffle:         !c.Bool("shuffle"),
		NumSamples:        c.Int("num-samples"),
		Replacement:       c.Bool("replacement"),
		TorchVersion:      c.String("torch-version"),
		PersistentWorkers: c.Bool("persistent-workers"),
		DALI: prefetch.DALIOptions{
			ShardID:           c.Int("dali-shard-id"),
			NumShards:         c.Int("dali-num-shards"),
			RandomShuffle:     c.Bool("dali-random-shuffle"),
			ShuffleAfterEpoch: c.Bool("dali-shuffle-after-epoch"),
			StickToShard:      c.Bool("dali-stick-to-shard"),
			Checkpointing:     c.Bool("dali-checkpointing"),
		},
	}
	if e := c.String("layout-extensions"); e != "" {
		for _, x := range strings.Split(e, ",") {
			if x = strings.TrimSpace(x); x != "" {
				s.Extensions = append(s.Extensions, x)
			}
		}
	}
	if r := c.String("ranks"); r != "" {
		ranks, err := orderParseRanks(r)
		if err != nil {
			return s, usagef("--ranks %q: %w", r, err)
		}
		for _, x := range ranks {
			if x >= max(s.WorldSize, 1) {
				return s, usagef("--ranks: rank %d: must be in [0, world size %d)", x, max(s.WorldSize, 1))
			}
		}
		s.Ranks = ranks
	}
	if f := c.String("rng-state"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return s, usagef("--rng-state: %w", err)
		}
		s.RNGState = orderRNGStateBytes(b)
	}
	switch {
	case s.WorldSize < 0:
		return s, usagef("--world-size %d: must be >= 1", s.WorldSize)
	case s.Rank < 0 || s.Rank >= max(s.WorldSize, 1):
		return s, usagef("--rank %d: must be in [0, world size %d)", s.Rank, max(s.WorldSize, 1))
	case s.NumSamples < 0:
		return s, usagef("--num-samples %d: must be >= 0", s.NumSamples)
	}
	// The dataset size is not known yet: build over one item to check
	// names and arguments.
	if _, err := prefetch.BuildOrder(s, 1); err != nil {
		return s, usagef("%w", err)
	}
	return s, nil
}

// orderParseRanks parses "0-3,6,7".
func orderParseRanks(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad rank %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad rank range %q", part)
			}
		}
		for r := a; r <= b; r++ {
			out = append(out, r)
		}
	}
	return out, nil
}

// orderRNGStateBytes accepts the state as raw bytes
// (torch.get_rng_state().numpy().tofile(FILE)) or as hex text
// (torch.get_rng_state().numpy().tobytes().hex()).
func orderRNGStateBytes(b []byte) []byte {
	if h, err := hex.DecodeString(string(bytes.TrimSpace(b))); err == nil {
		return h
	}
	return b
}

func orderMountpoint(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usagef("order %s: want exactly one MOUNTPOINT, got %d arguments", c.Command.Name, c.NArg())
	}
	return c.Args().First(), nil
}

// orderClient returns an HTTP client that talks to the mount's control
// socket.
func orderClient(mountpoint string) (*http.Client, error) {
	sock, err := fs.ControlSocketPath(mountpoint)
	if err != nil {
		return nil, usagef("%s is not a stallfs mount (no control socket): %w", mountpoint, err)
	}
	return socketHTTPClient(sock, time.Minute), nil
}

// orderCheck turns a non-2xx answer into an error carrying its first line.
func orderCheck(resp *http.Response) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	msg, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if resp.StatusCode == http.StatusNotFound && msg == "404 page not found" {
		msg = "this mount has no prefetcher (mount it with --order)"
	}
	return fmt.Errorf("%s: %s", resp.Status, msg)
}

func orderShow(c *cli.Context) error {
	mp, err := orderMountpoint(c)
	if err != nil {
		return err
	}
	cl, err := orderClient(mp)
	if err != nil {
		return err
	}
	q := url.Values{"epoch": {strconv.Itoa(c.Int("epoch"))}, "limit": {strconv.Itoa(c.Int("limit"))}}
	if r := c.String("reader"); r != "" {
		q.Set("reader", r)
	}
	req, err := http.NewRequestWithContext(c.Context, http.MethodGet, "http://stallfs/v1/order?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := cl.Do(req)
	if err != nil {
		return fmt.Errorf("order show %s: %w", mp, err)
	}
	defer resp.Body.Close()
	if err := orderCheck(resp); err != nil {
		return fmt.Errorf("order show %s: %w", mp, err)
	}
	if _, err := io.Copy(c.App.Writer, resp.Body); err != nil && !errors.Is(err, iofs.ErrClosed) {
		return fmt.Errorf("order show %s: %w", mp, err)
	}
	return nil
}

func orderSet(c *cli.Context) error {
	mp, err := orderMountpoint(c)
	if err != nil {
		return err
	}
	spec, err := parseOrderSpec(c)
	if err != nil {
		return err
	}
	spec.Epoch = c.Int("epoch")
	body, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	cl, err := orderClient(mp)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(c.Context, http.MethodPost, "http://stallfs/v1/order", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return fmt.Errorf("order set %s: %w", mp, err)
	}
	defer resp.Body.Close()
	if err := orderCheck(resp); err != nil {
		return fmt.Errorf("order set %s: %w", mp, err)
	}
	return nil
}

func orderCompute(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("order compute: want exactly one DIR, got %d arguments", c.NArg())
	}
	dir := c.Args().First()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return usagef("order compute: %s is not a directory", dir)
	}
	spec, err := parseOrderSpec(c)
	if err != nil {
		return err
	}
	l, o, err := prefetch.Build(spec, os.DirFS(dir))
	if err != nil {
		return fmt.Errorf("order compute %s: %w", dir, err)
	}
	if err := prefetch.WriteOrder(c.App.Writer, l, o, c.Int("epoch"), c.Int("limit")); err != nil {
		return fmt.Errorf("order compute %s: %w", dir, err)
	}
	return nil
}
