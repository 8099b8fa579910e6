package fs

import (
	"context"
	"time"

	"github.com/stallfs/stallfs/backend"
)

// readTree lists the source and lays it out.
func readTree(ctx context.Context, b backend.Backend, opts Options) (*tree, error) {
	root, err := b.Stat(ctx, "")
	if err != nil {
		// Object stores may have no entry for the root prefix; the
		// listing below still reports a missing source.
		root = backend.Entry{Mode: 0o555, ModTime: time.Now()}
	}
	listing, err := listAll(ctx, b, opts.ListParallel)
	if err != nil {
		return nil, err
	}
	return buildTree(root, listing)
}
