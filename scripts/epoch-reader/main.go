// Command epoch-reader reads a dataset directory the way a training loop
// does: every epoch visits every file once, in a seeded random order, with
// N concurrent readers (like DataLoader workers). It prints per epoch the
// files, bytes, seconds, MB/s and files/s, and can verify every byte
// against a manifest (path, size, sha256) or a second copy of the tree.
//
//	go run ./scripts/epoch-reader -dir /mnt/imagenet -epochs 3 -readers 8 -manifest m.tsv
//
// It exits 1 if any read fails or any file differs.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.Dir, "dir", "", "dataset directory to read (required)")
	flag.IntVar(&cfg.Epochs, "epochs", 3, "number of epochs")
	flag.IntVar(&cfg.Readers, "readers", 8, "concurrent readers")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "shuffle seed; epoch e uses (seed, e)")
	flag.StringVar(&cfg.Manifest, "manifest", "", "verify against FILE: lines \"path<TAB>size<TAB>sha256\" (paths relative to -dir); the file list comes from it")
	flag.StringVar(&cfg.VerifyDir, "verify-dir", "", "verify every file byte for byte against the same path under DIR")
	flag.BoolVar(&cfg.Warm, "warm", false, "read everything once, untimed, before the measured epochs")
	flag.StringVar(&cfg.Format, "format", "text", "output: text, or tsv (label epoch readers files bytes seconds MB/s files/s)")
	flag.StringVar(&cfg.Label, "label", "", "label of the tsv rows (default: -dir)")
	flag.Parse()
	if err := mainErr(cfg, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "epoch-reader: %v\n", err)
		os.Exit(1)
	}
}

// config is the reader's command line.
type config struct {
	Dir       string
	Epochs    int
	Readers   int
	Seed      uint64
	Manifest  string
	VerifyDir string
	Warm      bool
	Format    string
	Label     string
}

func mainErr(cfg config, out io.Writer) error {
	if cfg.Dir == "" {
		return fmt.Errorf("-dir is required")
	}
	if cfg.Epochs < 1 || cfg.Readers < 1 {
		return fmt.Errorf("-epochs and -readers must be at least 1")
	}
	if cfg.Format != "text" && cfg.Format != "tsv" {
		return fmt.Errorf("-format must be text or tsv, not %q", cfg.Format)
	}
	if cfg.Label == "" {
		cfg.Label = cfg.Dir
	}
	var (
		files []fileInfo
		err   error
	)
	if cfg.Manifest != "" {
		files, err = readManifest(cfg.Manifest)
	} else {
		files, err = listFiles(cfg.Dir)
	}
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no files under %s", cfg.Dir)
	}
	var total int64
	for _, f := range files {
		total += f.Size
	}
	r := &reader{dir: cfg.Dir, files: files, readers: cfg.Readers, verifyDir: cfg.VerifyDir}
	if cfg.Format == "text" {
		fmt.Fprintf(out, "%s: %d files, %s; %d epochs, %d readers, seed %d\n",
			cfg.Dir, len(files), mb(total), cfg.Epochs, cfg.Readers, cfg.Seed)
	}
	if cfg.Warm {
		if _, err := r.epoch(identity(len(files))); err != nil {
			return fmt.Errorf("warm-up pass: %w", err)
		}
	}
	var sum result
	for e := 1; e <= cfg.Epochs; e++ {
		res, err := r.epoch(permutation(cfg.Seed, uint64(e), len(files)))
		if err != nil {
			return fmt.Errorf("epoch %d: %w", e, err)
		}
		sum.Files += res.Files
		sum.Bytes += res.Bytes
		sum.Elapsed += res.Elapsed
		switch cfg.Format {
		case "text":
			fmt.Fprintf(out, "epoch %d/%d: %d files, %s in %.2f s: %.1f MB/s, %.0f files/s\n",
				e, cfg.Epochs, res.Files, mb(res.Bytes), res.Elapsed.Seconds(), res.mbps(), res.filesps())
		case "tsv":
			fmt.Fprintf(out, "%s\t%d\t%d\t%d\t%d\t%.3f\t%.1f\t%.0f\n",
				cfg.Label, e, cfg.Readers, res.Files, res.Bytes, res.Elapsed.Seconds(), res.mbps(), res.filesps())
		}
	}
	if cfg.Format == "text" {
		verified := "not verified"
		switch {
		case cfg.Manifest != "":
			verified = "every byte verified against " + cfg.Manifest
		case cfg.VerifyDir != "":
			verified = "every byte verified against " + cfg.VerifyDir
		}
		fmt.Fprintf(out, "total: %d files, %s in %.2f s: %.1f MB/s, %.0f files/s (%s)\n",
			sum.Files, mb(sum.Bytes), sum.Elapsed.Seconds(), sum.mbps(), sum.filesps(), verified)
	}
	return nil
}

// result is what one epoch read.
type result struct {
	Files   int
	Bytes   int64
	Elapsed time.Duration
}

func (r result) mbps() float64    { return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds() }
func (r result) filesps() float64 { return float64(r.Files) / r.Elapsed.Seconds() }

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
