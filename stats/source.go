package stats

// Source names where the bytes of a read came from.
type Source uint8

// The sources, in the order the read path consults them.
const (
	Memory  Source = iota // mincache memory tier
	Disk                  // mincache disk tier
	Peer                  // another mount of the group
	Backend               // the storage backend
	numSources
)

// String returns the source's name as used in JSON keys and metric labels.
func (s Source) String() string {
	switch s {
	case Memory:
		return "memory"
	case Disk:
		return "disk"
	case Peer:
		return "peer"
	case Backend:
		return "backend"
	default:
		return "unknown"
	}
}
