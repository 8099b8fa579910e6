package main

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"net/url"
	"os"
	"sort"

	"github.com/urfave/cli/v2"

	"github.com/stallfs/stallfs/backend"
	"github.com/stallfs/stallfs/backend/local"
)

// sourceOpener opens one kind of SOURCE.
type sourceOpener struct {
	// open returns the backend for u. Bad input (a missing bucket name, a
	// path that is not a directory, malformed credentials) is reported
	// with usagef so that it exits with status 2 before anything mounts.
	// log receives the backend's own notices and warnings.
	open func(ctx context.Context, c *cli.Context, u *url.URL, log *slog.Logger) (backend.Backend, error)
	// flags are the source's own flags, appended to the mount command's.
	// Each has an STALLFS_... environment variable.
	flags []cli.Flag
	// implied, when set, returns the SOURCE that the source's own flags
	// name (for example a blobfuse2 --config-file), so that
	// `stallfs mount [flags] MOUNTPOINT` works without SOURCE. ok is false
	// when the flags name no source.
	implied func(c *cli.Context) (source string, ok bool, err error)
}

// sourceOpeners is the table of sources keyed by URL scheme. A new source
// adds one line here and its opener in a source_<name>.go file.
func sourceOpeners() map[string]sourceOpener {
	return map[string]sourceOpener{
		"file":  {open: openFileSource},
		"s3":    {open: openS3, flags: s3Flags()},
		"az":    {open: openAzure, flags: azureFlags(), implied: impliedAzureSource},
		"https": {open: openAzure}, // https://ACCOUNT.blob.core.windows.net/CONTAINER
	}
}

// sourceSchemes lists the known schemes, sorted.
func sourceSchemes(openers map[string]sourceOpener) []string {
	s := make([]string, 0, len(openers))
	for k := range openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// sourceFlags collects every source's flags, in scheme order.
func sourceFlags(openers map[string]sourceOpener) []cli.Flag {
	var flags []cli.Flag
	for _, k := range sourceSchemes(openers) {
		flags = append(flags, openers[k].flags...)
	}
	return flags
}

// impliedSource completes a lone MOUNTPOINT argument with the SOURCE that
// a source's flags imply; other argument lists are returned unchanged.
func impliedSource(c *cli.Context, openers map[string]sourceOpener, args []string) ([]string, error) {
	if len(args) != 1 {
		return args, nil
	}
	for _, k := range sourceSchemes(openers) {
		o := openers[k]
		if o.implied == nil {
			continue
		}
		src, ok, err := o.implied(c)
		if err != nil {
			return nil, err
		}
		if ok {
			return []string{src, args[0]}, nil
		}
	}
	return args, nil
}

// openFileSource opens a local directory (a plain path or file:///path).
func openFileSource(_ context.Context, _ *cli.Context, u *url.URL, _ *slog.Logger) (backend.Backend, error) {
	if err := checkSourceDir(u.Path); err != nil {
		return nil, err
	}
	b, err := local.New(u.Path)
	if err != nil {
		return nil, fmt.Errorf("open source %q: %w", u.Path, err)
	}
	return b, nil
}

// checkSourceDir reports, as a usage error, a source path that is missing
// or not a directory.
func checkSourceDir(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, iofs.ErrNotExist):
		return usagef("source %q does not exist", path)
	case errors.Is(err, iofs.ErrPermission):
		return usagef("source %q is not accessible: permission denied", path)
	case err != nil:
		return usagef("source %q: %w", path, pathErrCause(err))
	case !st.IsDir():
		return usagef("source %q is not a directory", path)
	}
	return nil
}

// pathErrCause strips the operation and path of a *PathError, which the
// caller's message already names.
func pathErrCause(err error) error {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
