package mincache

import "path/filepath"

// NamespaceDir returns the directory of source's namespace under the cache
// directory root: where Open keeps that source's disk tier. Other stallfs
// state of the source (its persisted metadata) lives there too; the disk
// tier never touches names it did not make.
func NamespaceDir(root, source string) string {
	return filepath.Join(root, namespace(source))
}
