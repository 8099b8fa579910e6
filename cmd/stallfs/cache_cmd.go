package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/mincache"
)

// cacheCommand is `stallfs cache info|drop MOUNTPOINT`.
func cacheCommand() *cli.Command {
	jsonFlag := &cli.BoolFlag{Name: "json", Usage: "print JSON"}
	return &cli.Command{
		Name:  "cache",
		Usage: "show or empty a mount's MinIO cache",
		Subcommands: []*cli.Command{
			{
				Name:      "info",
				Usage:     "show the fill level of each cache tier",
				ArgsUsage: "MOUNTPOINT",
				Flags:     []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					return cacheRequest(c, http.MethodGet, "/v1/cache")
				},
			},
			{
				Name:      "drop",
				Usage:     "empty every tier of the cache (the next epoch reads everything from the backend)",
				ArgsUsage: "MOUNTPOINT",
				Flags:     []cli.Flag{jsonFlag},
				Action: func(c *cli.Context) error {
					return cacheRequest(c, http.MethodPost, "/v1/cache/drop")
				},
			},
		},
	}
}

func cacheRequest(c *cli.Context, method, path string) error {
	if c.NArg() != 1 {
		return usagef("cache %s: expected MOUNTPOINT, got %d argument(s)", c.Command.Name, c.NArg())
	}
	mnt := c.Args().First()
	if _, err := os.Stat(mnt); err != nil {
		return usagef("cache %s: %s: %v", c.Command.Name, mnt, statsErrText(err))
	}
	sock, err := fs.ControlSocketPath(mnt)
	if err != nil {
		return usagef("cache %s: %s is not a stallfs mount (%v)", c.Command.Name, mnt, err)
	}
	client := statsClient(sock)
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(c.Context, method, "http://stallfs"+path, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("cache %s: %s: %w", c.Command.Name, mnt, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("cache %s: %s: %s", c.Command.Name, mnt, strings.TrimSpace(string(msg)))
	}
	var out cacheInfo
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("cache %s: decode: %w", c.Command.Name, err)
	}
	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if !out.Enabled || out.Info == nil {
		fmt.Fprintln(w, "cache: none (mounted with --cache-mem 0 and no --cache-disk)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tier\tused\tbudget\tfill\titems\thits\tmisses\trejected (full)\tstate\t")
	for _, t := range []struct {
		name string
		ti   mincache.TierInfo
	}{{"memory", out.Info.Memory}, {"disk", out.Info.Disk}} {
		fill := 0.0
		if t.ti.BudgetBytes > 0 {
			fill = 100 * float64(t.ti.UsedBytes) / float64(t.ti.BudgetBytes)
		}
		state := "ok"
		if t.ti.Disabled {
			state = "disabled: " + t.ti.DisabledReason
		} else if t.ti.BudgetBytes == 0 {
			state = "off"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f%%\t%d\t%d\t%d\t%d\t%s\t\n", t.name,
			humanize.IBytes(uint64(max(t.ti.UsedBytes, 0))), humanize.IBytes(uint64(max(t.ti.BudgetBytes, 0))),
			fill, t.ti.Items, t.ti.Hits, t.ti.Misses, t.ti.RejectedFull, state)
	}
	if out.Info.Dir != "" {
		fmt.Fprintf(tw, "dir: %s\n", out.Info.Dir)
	}
	return tw.Flush()
}
