package mincache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// keyHash identifies Path+Chunk (not Version): two versions of one item share
// a keyHash, which is how a lookup with a newer version finds and invalidates
// the older entry. 128 bits of SHA-256 make collisions negligible at any
// realistic item count, so neither tier keeps the path in memory.
type keyHash [16]byte

func hashKey(k Key) keyHash {
	var stack [256]byte
	buf := stack[:0]
	if len(k.Path)+16 > len(stack) {
		buf = make([]byte, 0, len(k.Path)+16)
	}
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(k.Path)))
	buf = append(buf, k.Path...)
	buf = binary.LittleEndian.AppendUint64(buf, uint64(k.Chunk))
	sum := sha256.Sum256(buf)
	var h keyHash
	copy(h[:], sum[:16])
	return h
}

func (h keyHash) String() string { return hex.EncodeToString(h[:]) }

// shard picks one of the memory tier's lock shards.
func (h keyHash) shard() int { return int(h[0]) & (memShards - 1) }

// hashVersion is FNV-1a 64 of the version string. The memory tier compares
// only this hash; the disk tier also stores and compares the full string.
func hashVersion(v string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(v); i++ {
		h ^= uint64(v[i])
		h *= prime
	}
	return h
}

// namespace is the per-source directory name under Options.Dir.
func namespace(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:])[:16]
}
