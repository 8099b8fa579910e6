package prefetch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"strings"
)

// Layout names accepted by Spec.Layout.
const (
	LayoutImageFolder = "imagefolder"
	LayoutSorted      = "sorted"
	LayoutDALIRoot    = "dali-root"
	// LayoutListPrefix ("list:FILE") reads one path per line;
	// LayoutDALIListPrefix ("dali-list:FILE") reads DALI file_list lines,
	// "path label".
	LayoutListPrefix     = "list:"
	LayoutDALIListPrefix = "dali-list:"
)

// Order names accepted by Spec.Order.
const (
	OrderSequential  = "sequential"
	OrderTorchRandom = "torch-random"
	OrderTorchDist   = "torch-distributed"
	OrderTorchGlobal = "torch-global"
	OrderList        = "list"
	OrderDALIFile    = "dali-file"
)

// Spec describes a layout and an order, as given by flags, environment
// variables or the control socket (POST /v1/order carries it as JSON).
// The zero value is the imagefolder layout read sequentially.
type Spec struct {
	// Layout is imagefolder (default), sorted, dali-root, list:FILE or
	// dali-list:FILE. A relative FILE is read from the mounted tree, an
	// absolute one from the host (it must not be inside the mount).
	Layout string `json:"layout,omitempty"`
	// Root is the dataset root inside the mount ("" is the mount root).
	Root string `json:"root,omitempty"`
	// Extensions replace the layout's default file extensions.
	Extensions []string `json:"extensions,omitempty"`
	// ListStripPrefix is removed from absolute paths in a list (the
	// mountpoint the list was written for).
	ListStripPrefix string `json:"list_strip_prefix,omitempty"`

	// Order is sequential (default), torch-random, torch-distributed,
	// torch-global, list or dali-file.
	Order string `json:"order,omitempty"`
	// Seed is the Python seed: torch.Generator().manual_seed(Seed) for
	// torch-random, DistributedSampler's seed, torch.manual_seed(Seed)
	// for torch-global. HasSeed says it was given (torch-random without a
	// seed uses a fresh Generator's default seed).
	Seed    int64 `json:"seed,omitempty"`
	HasSeed bool  `json:"has_seed,omitempty"`
	// WorldSize, Rank, DropLast and NoShuffle are DistributedSampler's.
	// Ranks, when set, lists every rank that reads through the mount (the
	// ranks of one node) instead of Rank; see BuildReaders.
	WorldSize int   `json:"world_size,omitempty"`
	Rank      int   `json:"rank,omitempty"`
	Ranks     []int `json:"ranks,omitempty"`
	DropLast  bool  `json:"drop_last,omitempty"`
	NoShuffle bool  `json:"no_shuffle,omitempty"`
	// NumSamples and Replacement are RandomSampler's.
	NumSamples  int  `json:"num_samples,omitempty"`
	Replacement bool `json:"replacement,omitempty"`
	// TorchVersion selects the randperm variant ("" = current, "1.13",
	// "2.6", "2.7", ...).
	TorchVersion string `json:"torch_version,omitempty"`
	// RNGState is torch.get_rng_state() taken right before the first
	// iter(loader), for torch-global (instead of Seed).
	RNGState []byte `json:"rng_state,omitempty"`
	// PersistentWorkers is DataLoader(persistent_workers=True), for
	// torch-global.
	PersistentWorkers bool `json:"persistent_workers,omitempty"`
	// DALI configures dali-file.
	DALI DALIOptions `json:"dali,omitzero"`
	// Epoch is the epoch the reader is in when the order is set.
	Epoch int `json:"epoch,omitempty"`
}

// Build builds the layout over fsys and the order that Spec describes.
func Build(s Spec, fsys iofs.FS) (*Layout, Order, error) {
	l, err := BuildLayout(s, fsys)
	if err != nil {
		return nil, nil, err
	}
	if l.Len() == 0 {
		return nil, nil, fmt.Errorf("layout %s: no files", s.layoutName())
	}
	o, err := BuildOrder(s, l.Len())
	if err != nil {
		return nil, nil, err
	}
	return l, o, nil
}

func (s Spec) layoutName() string {
	if s.Layout == "" {
		return LayoutImageFolder
	}
	return s.Layout
}

// BuildLayout builds the layout Spec names over fsys.
func BuildLayout(s Spec, fsys iofs.FS) (*Layout, error) {
	root := strings.Trim(path.Clean("/"+s.Root), "/")
	switch name := s.layoutName(); {
	case name == LayoutImageFolder:
		return ImageFolder(fsys, ImageFolderOptions{Root: root, Extensions: lowerAll(s.Extensions)})
	case name == LayoutSorted:
		return Sorted(fsys, root)
	case name == LayoutDALIRoot:
		return DALIRoot(fsys, root, s.Extensions)
	case strings.HasPrefix(name, LayoutListPrefix), strings.HasPrefix(name, LayoutDALIListPrefix):
		labels := strings.HasPrefix(name, LayoutDALIListPrefix)
		file := name[strings.IndexByte(name, ':')+1:]
		if file == "" {
			return nil, fmt.Errorf("layout %s: missing FILE", name)
		}
		b, err := readListFile(fsys, root, file)
		if err != nil {
			return nil, fmt.Errorf("layout %s: %w", name, err)
		}
		return ParseList(bytes.NewReader(b), ListOptions{Root: root, StripPrefix: s.ListStripPrefix, Labels: labels})
	default:
		return nil, fmt.Errorf("unknown layout %q (want imagefolder, sorted, dali-root, list:FILE or dali-list:FILE)", name)
	}
}

func lowerAll(exts []string) []string {
	if exts == nil {
		return nil
	}
	out := make([]string, len(exts))
	for i, e := range exts {
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		out[i] = pyLower(e)
	}
	return out
}

func readListFile(fsys iofs.FS, root, file string) ([]byte, error) {
	if strings.HasPrefix(file, "/") {
		return os.ReadFile(file)
	}
	p := path.Clean(file)
	if root != "" && !strings.HasPrefix(p, root+"/") {
		// A list next to the data (DALI's default file_root).
		if b, err := iofs.ReadFile(fsys, path.Join(root, p)); err == nil {
			return b, nil
		}
	}
	return iofs.ReadFile(fsys, p)
}

// BuildOrder builds the order Spec describes over n items.
func BuildOrder(s Spec, n int) (Order, error) {
	v, err := ParseTorchVersion(s.TorchVersion)
	if err != nil {
		return nil, err
	}
	sampler := SamplerOptions{NumSamples: s.NumSamples, Replacement: s.Replacement, Version: v}
	switch s.Order {
	case "", OrderSequential:
		return NewSequential(n), nil
	case OrderTorchRandom:
		seed := DefaultTorchSeed
		if s.HasSeed {
			seed = uint64(s.Seed)
		}
		return NewTorchRandom(n, seed, sampler)
	case OrderTorchDist:
		return NewTorchDistributed(n, DistributedOptions{Seed: uint64(s.Seed), WorldSize: s.WorldSize, Rank: s.Rank,
			DropLast: s.DropLast, NoShuffle: s.NoShuffle, Version: v})
	case OrderTorchGlobal:
		var g *MT19937
		switch {
		case len(s.RNGState) > 0:
			if g, err = TorchStateFromBytes(s.RNGState); err != nil {
				return nil, err
			}
		case s.HasSeed:
			g = NewTorchGenerator(uint64(s.Seed))
		default:
			return nil, fmt.Errorf("order torch-global needs the torch.manual_seed value (seed) or torch.get_rng_state() (rng state)")
		}
		return NewTorchGlobal(n, g, s.PersistentWorkers, sampler)
	case OrderList:
		return NewList(n, false), nil
	case OrderDALIFile:
		return NewDALIFile(n, s.DALI)
	default:
		return nil, fmt.Errorf("unknown order %q (want sequential, torch-random, torch-distributed, torch-global, list or dali-file)", s.Order)
	}
}

// BuildReaders builds one Reader per rank of Spec.Ranks for
// torch-distributed (named "rank R"), and otherwise the single reader of
// BuildOrder.
func BuildReaders(s Spec, n int) ([]Reader, error) {
	if s.Order != OrderTorchDist || len(s.Ranks) == 0 {
		o, err := BuildOrder(s, n)
		if err != nil {
			return nil, err
		}
		return []Reader{{Order: o}}, nil
	}
	var rs []Reader
	for _, r := range s.Ranks {
		s.Rank = r
		o, err := BuildOrder(s, n)
		if err != nil {
			return nil, err
		}
		rs = append(rs, Reader{Name: fmt.Sprintf("rank %d", r), Order: o})
	}
	return rs, nil
}

// WriteOrder writes the paths of epoch e of o over l, one per line,
// relative to the mount root; limit > 0 stops after limit lines. It is
// what `stallfs order show` prints (GET /v1/order?epoch=E&limit=N).
func WriteOrder(w io.Writer, l *Layout, o Order, e, limit int) error {
	idx, err := o.Epoch(e)
	if err != nil {
		return err
	}
	if o.Len() != l.Len() {
		return fmt.Errorf("order is for %d items, layout has %d", o.Len(), l.Len())
	}
	if limit > 0 && limit < len(idx) {
		idx = idx[:limit]
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, i := range idx {
		bw.WriteString(l.Path(i))
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Layout returns the prefetcher's layout.
func (p *Prefetcher) Layout() *Layout { return p.layout }

// Order returns the order of the prefetcher's first reader.
func (p *Prefetcher) Order() Order {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracks[0].order
}

// Readers returns the readers the prefetcher follows.
func (p *Prefetcher) Readers() []Reader {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Reader, len(p.tracks))
	for i, t := range p.tracks {
		out[i] = Reader{Name: t.name, Order: t.order}
	}
	return out
}
