// Command gen-dataset writes a deterministic ImageNet-like dataset: class
// directories of files whose sizes follow a clamped log-normal distribution
// with a chosen mean, optional large shard files, and an optional manifest.
//
//	go run ./scripts/gen-dataset -out DIR [-classes 100] [-files 10000 | -bytes 1GiB]
//	    [-seed 1] [-mean 110KiB] [-min 10KiB] [-max 1MiB] [-sigma 0.6]
//	    [-shards 0 -shard-size 256MiB] [-manifest FILE] [-jpeg] [-workers N]
//
// The same flags give the same tree, byte for byte. Without -jpeg, byte i
// of the file at relative path p (e.g. "train/n01440764/n01440764_18.JPEG")
// is byte i of pattern.Fill(p) (backend/backendtest/pattern, which
// backendtest.Pattern is too), so any byte can be checked without a
// manifest. With -jpeg, files are decodable JPEGs (noise over gradients,
// padded to the drawn size with comment segments); they are deterministic
// but checked against the manifest or a second run.
//
// It uses the standard library and backend/backendtest/pattern (itself standard
// library only).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "gen-dataset:", err)
			os.Exit(2)
		}
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "gen-dataset:", err)
		os.Exit(1)
	}
}

// usageError is a bad flag or argument (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	st, err := generate(c)
	if err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Fprintf(stdout, "wrote %d files and %d shards, %d bytes, to %s in %.2fs (%.0f MB/s)\n",
		st.files, st.shards, st.bytes, c.out, d.Seconds(), float64(st.bytes)/1e6/d.Seconds())
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fl := flag.NewFlagSet("gen-dataset", flag.ContinueOnError)
	fl.SetOutput(stderr)
	c := config{}
	var bytesFlag, meanFlag, minFlag, maxFlag, shardSizeFlag string
	var seed uint64
	fl.StringVar(&c.out, "out", "", "write the dataset under `DIR` (created if missing)")
	fl.IntVar(&c.classes, "classes", 100, "number of class directories under train/")
	fl.IntVar(&c.files, "files", 10000, "number of files (ignored when -bytes is set)")
	fl.StringVar(&bytesFlag, "bytes", "", "write about `SIZE` bytes of files instead of -files (e.g. 1GiB)")
	fl.Uint64Var(&seed, "seed", 1, "seed of names, sizes and contents")
	fl.StringVar(&meanFlag, "mean", "110KiB", "mean file `SIZE`")
	fl.StringVar(&minFlag, "min", "10KiB", "smallest file `SIZE`")
	fl.StringVar(&maxFlag, "max", "1MiB", "largest file `SIZE`")
	fl.Float64Var(&c.sigma, "sigma", 0.6, "standard deviation of the log of file sizes")
	fl.IntVar(&c.shards, "shards", 0, "number of large shard files under shards/")
	fl.StringVar(&shardSizeFlag, "shard-size", "256MiB", "`SIZE` of each shard file")
	fl.StringVar(&c.manifest, "manifest", "", "write \"path<TAB>size<TAB>sha256\" lines, sorted by path, to `FILE`")
	fl.BoolVar(&c.jpeg, "jpeg", false, "write decodable JPEG images instead of pattern bytes")
	fl.IntVar(&c.workers, "workers", runtime.NumCPU(), "files written in parallel")
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, usageError{err.Error()}
	}
	if fl.NArg() > 0 {
		return c, usageError{fmt.Sprintf("unexpected argument %q", fl.Arg(0))}
	}
	c.seed = seed
	sizes := []struct {
		name string
		s    string
		dst  *int64
	}{
		{"-bytes", bytesFlag, &c.bytes}, {"-mean", meanFlag, &c.mean}, {"-min", minFlag, &c.min},
		{"-max", maxFlag, &c.max}, {"-shard-size", shardSizeFlag, &c.shardSize},
	}
	for _, s := range sizes {
		if s.s == "" {
			continue
		}
		v, err := parseSize(s.s)
		if err != nil {
			return c, usageError{fmt.Sprintf("%s: %v", s.name, err)}
		}
		*s.dst = v
	}
	if err := c.validate(); err != nil {
		return c, usageError{err.Error()}
	}
	return c, nil
}
