package stats

import (
	"testing"
	"unsafe"
)

// TestLayout pins the cache-line layout the hot path relies on.
func TestLayout(t *testing.T) {
	var s shard
	if sz := unsafe.Sizeof(s); sz%64 != 0 {
		t.Errorf("shard is %d bytes, want a multiple of 64", sz)
	}
	for name, off := range map[string]uintptr{
		"touch":         unsafe.Offsetof(s.touch),
		"bytes[Disk]":   unsafe.Offsetof(s.bytes) + 8*uintptr(Disk),
		"reads[Disk]":   unsafe.Offsetof(s.reads) + 8*uintptr(Disk),
		"reads[Peer]":   unsafe.Offsetof(s.reads) + 8*uintptr(Peer),
		"bytes[Memory]": unsafe.Offsetof(s.bytes),
	} {
		if off >= 64 {
			t.Errorf("shard.%s at offset %d, want in the first cache line", name, off)
		}
	}
	if sz := unsafe.Sizeof(fileEntry{}); sz != 32 {
		t.Errorf("fileEntry is %d bytes, want 32", sz)
	}
	r := New(Options{Files: 1 << 16})
	if p := uintptr(unsafe.Pointer(&r.shards[0])); p%64 != 0 {
		t.Errorf("shards start at %#x, not on a cache line", p)
	}
	if r.groupBits != shardBits {
		t.Fatalf("64K files: %d group bits, want %d", r.groupBits, shardBits)
	}
	for f := range uint32(1000) {
		if r.groupOf(f).touch != &r.shards[shardOf(f)].touch {
			t.Fatalf("file %d: group word is not in its shard", f)
		}
	}
}
