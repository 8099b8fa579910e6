package mincache

// Key names one cached item: a whole file when it is at most the chunk size,
// otherwise chunk Chunk (0-based) of a larger file. Path is relative to the
// source root. An entry stored under one Version is never served for
// another: a lookup with a newer version invalidates the old entry.
type Key struct {
	Path    string
	Version string
	Chunk   int64
}

// Tier names where an item lives.
type Tier uint8

// The tiers, in the order the read path consults them.
const (
	None   Tier = iota // not cached
	Memory             // the off-heap memory arena
	Disk               // the local-disk tier
)

// String returns the tier's lower-case name.
func (t Tier) String() string {
	switch t {
	case Memory:
		return "memory"
	case Disk:
		return "disk"
	default:
		return "none"
	}
}
