package main

import (
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/local"
	"github.com/stallfs/stallfs/fs"
	"github.com/stallfs/stallfs/mincache"
)

// metadataFlags are the flags of the persisted tree.
func metadataFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{
			Name:    "metadata-cache",
			Value:   true,
			Usage:   "with --cache-dir, persist the listed tree there so that a remount of an unchanged source does not list it again",
			EnvVars: []string{"STALLFS_METADATA_CACHE"},
		},
	}
}

// metadataFileName is the persisted tree's name in a source's namespace of
// the cache directory, beside the disk tier.
const metadataFileName = "tree"

// metadataSetting is where a mount persists its tree and how the file is
// validated.
type metadataSetting struct {
	file     string // empty: not persisted
	dirTimes bool   // validate by directory times (local sources)
}

// newMetadataSetting decides from the configuration and the source's own
// backend (before any throttle wraps it): a local directory's tree is
// validated by its directories' times, any other source's by a background
// re-list.
func newMetadataSetting(cfg pipelineConfig, b backend.Backend) metadataSetting {
	if !cfg.MetadataCache || cfg.CacheDir == "" {
		return metadataSetting{}
	}
	_, isLocal := b.(*local.Backend)
	return metadataSetting{
		file:     filepath.Join(mincache.NamespaceDir(cfg.CacheDir, b.String()), metadataFileName),
		dirTimes: isLocal,
	}
}

// apply sets the fs options of the persisted tree.
func (s metadataSetting) apply(o *fs.Options) {
	o.MetadataFile = s.file
	o.MetadataDirTimes = s.dirTimes
}
