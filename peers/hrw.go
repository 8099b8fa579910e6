package peers

import "hash/fnv"

// Rendezvous hashing: the owner of a key is the member with the highest
// score mix(hash(key) ^ hash(member)). Member hashes are computed once, so
// an owner lookup costs one key hash and one multiply-xorshift per member.

// hashString is 64-bit FNV-1a followed by a finalizer, so that keys that
// differ in one byte get unrelated hashes.
func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return mix(h.Sum64())
}

// mix is the SplitMix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// owner returns the index of the member with the highest score for key
// hash hk among the members whose live(i) is true, or -1 when none is.
// Ties (not expected with 64-bit scores) go to the lower index.
func owner(hk uint64, members []uint64, live func(i int) bool) int {
	best, bestScore := -1, uint64(0)
	for i, hm := range members {
		if live != nil && !live(i) {
			continue
		}
		if s := mix(hk ^ hm); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

// Owner returns the member of members that owns key under rendezvous
// hashing ("" when members is empty). It is what Group uses with every
// member live; tools use it to predict the partition.
func Owner(key string, members []string) string {
	hs := make([]uint64, len(members))
	for i, m := range members {
		hs[i] = hashString(m)
	}
	i := owner(hashString(key), hs, nil)
	if i < 0 {
		return ""
	}
	return members[i]
}
