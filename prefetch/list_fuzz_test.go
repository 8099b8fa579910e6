package prefetch

import (
	"path"
	"strings"
	"testing"
)

// FuzzParseList feeds ParseList arbitrary list files (plain and DALI
// file_list, with and without a root and a stripped prefix). It must not
// panic, and every path it accepts is clean, relative and inside the
// mount, and is found again by Index.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{
		"", "\n\n", "a/b.jpg\nc.jpg\n", "a.jpg 0\nb.jpg 17\n", "/mnt/x/a.jpg\n/mnt/x/b/c.jpg\n",
		"../etc/passwd\n", "a/../../b\n", "./a\n", "a//b\r\n", "a b c 3\n", "x\tlabel\n",
		"/other/a\n", ".\n", "..\n", "a.jpg -1\n", "a.jpg 1e3\n", " \t \n", "a\x00b\n",
		"dup\ndup\ndup\n", strings.Repeat("x", 70000) + "\n",
	} {
		for _, labels := range []bool{false, true} {
			f.Add(s, "", "/mnt/x", labels)
			f.Add(s, "train", "", labels)
		}
	}
	f.Fuzz(func(t *testing.T, list, root, strip string, labels bool) {
		l, err := ParseList(strings.NewReader(list), ListOptions{Root: root, StripPrefix: strip, Labels: labels})
		if err != nil {
			return
		}
		for i := range l.Len() {
			p := l.Path(i)
			if p == "" || path.Clean(p) != p || strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
				t.Fatalf("ParseList accepted path %d %q: not clean, relative and inside the mount", i, p)
			}
			j, ok := l.Index(p)
			if !ok || j > i || l.Path(j) != p {
				t.Fatalf("Index(%q) = %d, %t; want the first index of a path at %d", p, j, ok, i)
			}
		}
	})
}
