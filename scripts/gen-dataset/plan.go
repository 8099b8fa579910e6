package main

import (
	"errors"
	"fmt"
	"math"
)

// config is what the flags ask for.
type config struct {
	out            string
	classes, files int
	bytes          int64 // when > 0, replaces files: about this many bytes
	seed           uint64
	mean, min, max int64
	sigma          float64
	shards         int
	shardSize      int64
	manifest       string
	jpeg           bool
	workers        int
}

func (c config) validate() error {
	switch {
	case c.out == "":
		return errors.New("-out DIR is required")
	case c.classes < 1:
		return fmt.Errorf("-classes %d: need at least 1", c.classes)
	case c.bytes == 0 && c.files < 0:
		return fmt.Errorf("-files %d: must not be negative", c.files)
	case c.min < 1 || c.min > c.max:
		return fmt.Errorf("-min %d, -max %d: need 1 <= min <= max", c.min, c.max)
	case c.mean < c.min || c.mean > c.max:
		return fmt.Errorf("-mean %d outside [-min %d, -max %d]", c.mean, c.min, c.max)
	case c.sigma <= 0 || c.sigma > 5:
		return fmt.Errorf("-sigma %g: want a value in (0, 5]", c.sigma)
	case c.shards < 0 || (c.shards > 0 && c.shardSize < 1):
		return fmt.Errorf("-shards %d -shard-size %d: need a positive shard size", c.shards, c.shardSize)
	case c.workers < 1:
		return fmt.Errorf("-workers %d: need at least 1", c.workers)
	case c.jpeg && c.min < minJPEG:
		return fmt.Errorf("-jpeg needs -min of at least %d bytes", minJPEG)
	}
	return nil
}

// fileSpec is one file to write.
type fileSpec struct {
	path  string // relative to the output directory, slash-separated
	size  int64
	jpeg  bool
	index uint64 // seeds the file's JPEG content
}

// plan lists the dataset's files in path order: class directories
// train/nXXXXXXXX with files nXXXXXXXX_K.JPEG (K increasing with gaps and
// of varying width, as in ImageNet), then shards/shard-NNNNNN.tar.
func plan(c config) []fileSpec {
	n := c.files
	if c.bytes > 0 {
		n = int(max(1, math.Round(float64(c.bytes)/float64(c.mean))))
	}
	mu := solveMu(float64(c.mean), float64(c.min), float64(c.max), c.sigma)
	specs := make([]fileSpec, 0, n+c.shards)
	wnid := uint64(1440764) // n01440764, ImageNet's first class
	// Class ids stay below 10^8 (eight digits, in path order) for any count.
	step := min(99991, max(1, 98_000_000/uint64(c.classes)))
	next := 0
	for class := range c.classes {
		wnid += 1 + mix(c.seed, 1<<40|uint64(class))%step
		count := n / c.classes
		if class < n%c.classes {
			count++
		}
		dir := fmt.Sprintf("train/n%08d", wnid)
		num := uint64(0)
		for range count {
			num += 1 + mix(c.seed, 2<<40|uint64(next))%19
			specs = append(specs, fileSpec{
				path:  fmt.Sprintf("%s/n%08d_%d.JPEG", dir, wnid, num),
				size:  drawSize(c.seed, uint64(next), mu, c),
				jpeg:  c.jpeg,
				index: uint64(next),
			})
			next++
		}
	}
	for s := range c.shards {
		specs = append(specs, fileSpec{path: fmt.Sprintf("shards/shard-%06d.tar", s), size: c.shardSize})
	}
	return specs
}

// drawSize draws the size of file i: exp(mu + sigma*Z) clamped to
// [min, max], with Z standard normal from (seed, i).
func drawSize(seed, i uint64, mu float64, c config) int64 {
	u1 := (float64(mix(seed, 3<<40|i)>>11) + 1) / (1 << 53) // (0, 1]
	u2 := float64(mix(seed, 4<<40|i)>>11) / (1 << 53)       // [0, 1)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	s := int64(math.Round(math.Exp(mu + c.sigma*z)))
	return min(max(s, c.min), c.max)
}

// solveMu returns the mu for which exp(mu + sigma*Z) clamped to [lo, hi]
// has the given mean, by bisection on the closed form of that mean.
func solveMu(mean, lo, hi, sigma float64) float64 {
	if lo == hi {
		return math.Log(lo)
	}
	a, b := math.Log(lo)-10*sigma, math.Log(hi)+10*sigma
	for range 200 {
		m := (a + b) / 2
		if clampedMean(m, sigma, lo, hi) < mean {
			a = m
		} else {
			b = m
		}
	}
	return (a + b) / 2
}

// clampedMean is E[min(max(exp(mu + sigma*Z), lo), hi)] for standard normal Z.
func clampedMean(mu, sigma, lo, hi float64) float64 {
	phi := func(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }
	alpha := (math.Log(lo) - mu) / sigma
	beta := (math.Log(hi) - mu) / sigma
	return lo*phi(alpha) + hi*(1-phi(beta)) + math.Exp(mu+sigma*sigma/2)*(phi(beta-sigma)-phi(alpha-sigma))
}

// mix is splitmix64 of seed and x: the one source of randomness, so a run
// depends on nothing but its flags.
func mix(seed, x uint64) uint64 {
	z := seed*0xd1342543de82ef95 + x*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
