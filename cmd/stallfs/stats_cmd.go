package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/stats"
)

// statsCommand is `stallfs stats MOUNTPOINT`: the mount's stall accounting,
// read from its control socket.
func statsCommand() *cli.Command {
	return statsCommandWith(fs.ControlSocketPath)
}

// statsCommandWith builds the command over a socket finder (tests pass
// their own).
func statsCommandWith(socketPath func(mountpoint string) (string, error)) *cli.Command {
	return &cli.Command{
		Name:      "stats",
		Usage:     "show a mount's fetch stall, per-epoch rows, cache fill and what-if predictions",
		ArgsUsage: "MOUNTPOINT",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the JSON document (docs/stats.md) instead of the summary", EnvVars: []string{"STALLFS_STATS_JSON"}},
			&cli.IntFlag{Name: "files", Value: 10, Usage: "show the `N` files that stalled most (0: none)", EnvVars: []string{"STALLFS_STATS_FILES"}},
			&cli.DurationFlag{Name: "watch", Usage: "refresh every `DURATION` (e.g. 2s) until interrupted", EnvVars: []string{"STALLFS_STATS_WATCH"}},
			&cli.StringFlag{Name: "what-if", Usage: "predict for cache budgets: a `LIST` of dataset shares and sizes, e.g. 50%,100% or 64GiB", EnvVars: []string{"STALLFS_STATS_WHAT_IF"}},
			&cli.StringFlag{Name: "consumer-rate", Usage: "the job's read `RATE` without stalls, e.g. 2GiB/s (default: measured)", EnvVars: []string{"STALLFS_STATS_CONSUMER_RATE"}},
		},
		Action: func(c *cli.Context) error {
			o, err := statsParse(c)
			if err != nil {
				return err
			}
			return statsRun(c.Context, c.App.Writer, socketPath, o)
		},
	}
}

// statsOpts are the validated arguments of the stats command.
type statsOpts struct {
	mountpoint   string
	json         bool
	files        int
	watch        time.Duration
	budgets      []statsBudget
	consumerRate float64
}

// statsBudget is one --what-if entry: a share of the dataset or a size.
type statsBudget struct {
	share float64 // used when bytes < 0
	bytes int64
}

// statsUsage is a bad-input error: exit status 2.
func statsUsage(format string, a ...any) error {
	return cli.Exit("stats: "+fmt.Sprintf(format, a...), exitUsage)
}

// statsParse validates the command line before anything is contacted.
func statsParse(c *cli.Context) (statsOpts, error) {
	o := statsOpts{json: c.Bool("json"), files: c.Int("files"), watch: c.Duration("watch")}
	if c.NArg() != 1 || c.Args().First() == "" {
		return o, statsUsage("expected MOUNTPOINT, got %d argument(s)", c.NArg())
	}
	o.mountpoint = c.Args().First()
	if o.files < 0 {
		return o, statsUsage("--files %d: must be >= 0", o.files)
	}
	if o.watch < 0 {
		return o, statsUsage("--watch %s: must be positive", o.watch)
	}
	var err error
	if o.budgets, err = statsParseBudgets(c.String("what-if")); err != nil {
		return o, err
	}
	if s := c.String("consumer-rate"); s != "" {
		v, err := humanize.ParseBytes(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
		if err != nil || v == 0 {
			return o, statsUsage("--consumer-rate %q: want a rate such as 2GiB/s", s)
		}
		o.consumerRate = float64(v)
	}
	return o, nil
}

// statsParseBudgets parses "50%,100%,64GiB".
func statsParseBudgets(list string) ([]statsBudget, error) {
	var out []statsBudget
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if p, ok := strings.CutSuffix(item, "%"); ok {
			v, err := strconv.ParseFloat(p, 64)
			if err != nil || v < 0 || v > 1000 {
				return nil, statsUsage("--what-if %q: want a share such as 50%%", item)
			}
			out = append(out, statsBudget{share: v / 100, bytes: -1})
			continue
		}
		v, err := humanize.ParseBytes(item)
		if err != nil || v > 1<<62 {
			return nil, statsUsage("--what-if %q: want a share (50%%) or a size (64GiB)", item)
		}
		out = append(out, statsBudget{bytes: int64(v)})
	}
	return out, nil
}

// statsRun fetches and prints once, or every o.watch until ctx ends.
func statsRun(ctx context.Context, w io.Writer, socketPath func(string) (string, error), o statsOpts) error {
	if _, err := os.Stat(o.mountpoint); err != nil {
		return statsUsage("%s: %v", o.mountpoint, statsErrText(err))
	}
	sock, err := socketPath(o.mountpoint)
	if err != nil {
		return statsUsage("%s is not a stallfs mount (%v)", o.mountpoint, err)
	}
	client := statsClient(sock)
	defer client.CloseIdleConnections()
	for {
		s, err := statsFetch(ctx, client, o)
		if err != nil {
			if o.watch > 0 && ctx.Err() != nil {
				return nil // watching ends when the context does
			}
			return err
		}
		if o.watch > 0 && !o.json {
			fmt.Fprint(w, "\x1b[H\x1b[2J") // cursor home, clear screen: redraw in place
		}
		if err := statsPrint(w, s, o); err != nil {
			return err
		}
		if o.watch <= 0 {
			return nil
		}
		t := time.NewTimer(o.watch)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// statsClient talks HTTP over the unix socket at sock.
func statsClient(sock string) *http.Client {
	return socketHTTPClient(sock, 30*time.Second)
}

// statsDoc is the part of GET /v1/stats the command shows: the stats
// snapshot and the peer group's section.
type statsDoc struct {
	stats.Snapshot
	Peers *peerStats `json:"peers,omitempty"`
}

// statsFetch GETs /v1/stats and applies the command's what-if options.
func statsFetch(ctx context.Context, client *http.Client, o statsOpts) (statsDoc, error) {
	var s statsDoc
	u := "http://stallfs/v1/stats?files=" + url.QueryEscape(strconv.Itoa(o.files))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return s, fmt.Errorf("stats: %w", err)
	}
	resp, err := client.Do(req)
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOTSOCK):
		return s, statsUsage("%s is not a stallfs mount (no control socket answers)", o.mountpoint)
	case errors.Is(err, syscall.EACCES):
		return s, fmt.Errorf("stats: %s: permission denied (the control socket belongs to the mount's owner)", o.mountpoint)
	case err != nil:
		return s, fmt.Errorf("stats: %s: %w", o.mountpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return s, fmt.Errorf("stats: %s: control socket answered %s: %s", o.mountpoint, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("stats: %s: decode: %w", o.mountpoint, err)
	}
	if len(o.budgets) > 0 || o.consumerRate > 0 {
		in := s.WhatIf.Inputs
		in.Budgets = nil
		for _, b := range o.budgets {
			if b.bytes < 0 {
				in.Budgets = append(in.Budgets, int64(b.share*float64(in.DatasetBytes)))
			} else {
				in.Budgets = append(in.Budgets, b.bytes)
			}
		}
		if o.consumerRate > 0 {
			in.ConsumerRate = o.consumerRate
		}
		s.WhatIf = stats.WhatIf(in)
	}
	return s, nil
}

// statsPrint writes the snapshot as JSON (one document per line when
// watching) or as the readable summary.
func statsPrint(w io.Writer, s statsDoc, o statsOpts) error {
	if !o.json {
		if err := stats.WriteText(w, s.Snapshot, stats.TextOptions{}); err != nil {
			return err
		}
		if s.Peers != nil {
			writePeerText(w, s.Peers)
		}
		return nil
	}
	enc := json.NewEncoder(w)
	if o.watch <= 0 {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("stats: %w", err)
	}
	return nil
}

// statsErrText is an error's text without the repeated path.
func statsErrText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
