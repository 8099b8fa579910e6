package prefetch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ImageExtensions is torchvision's IMG_EXTENSIONS, the default filter of
// ImageFolder.
var ImageExtensions = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

// DALIExtensions are DALI's known image and audio extensions, the default
// file_filters of fn.readers.file (matched case-insensitively).
var DALIExtensions = []string{".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".pnm", ".ppm", ".pgm", ".pbm", ".jp2", ".webp", ".flac", ".ogg", ".wav"}

// maxWalkDepth stops a walk that follows symlinks around a loop (Python
// would recurse until it fails; a mount must not).
const maxWalkDepth = 64

// pyLower is Python's str.lower() for the purpose of a suffix test: it
// differs from Go's strings.ToLower for U+0130 "İ" (Python gives "i" plus
// U+0307 COMBINING DOT ABOVE, two characters) and lowers everything else
// rune by rune. Invalid UTF-8 (which Python would have surrogate-escaped)
// is kept byte for byte.
func pyLower(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteByte(s[i])
		case r == '\u0130':
			b.WriteString("i\u0307")
		default:
			b.WriteRune(unicode.ToLower(r))
		}
		i += size
	}
	return b.String()
}

func hasExtension(name string, exts []string) bool {
	l := pyLower(name)
	for _, e := range exts {
		if strings.HasSuffix(l, e) {
			return true
		}
	}
	return false
}

// isDir reports whether the entry name in dir is a directory, following a
// symlink as Python's DirEntry.is_dir() does.
func isDir(fsys iofs.FS, dir string, e iofs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&iofs.ModeSymlink == 0 {
		return false
	}
	fi, err := iofs.Stat(fsys, path.Join(dir, e.Name()))
	return err == nil && fi.IsDir()
}

// ImageFolderOptions configures ImageFolder.
type ImageFolderOptions struct {
	// Root is the dataset root inside the file system ("" or "."); paths
	// in the layout still start at the file system's root.
	Root string
	// Extensions are the accepted suffixes of the lowered path (nil:
	// ImageExtensions).
	Extensions []string
}

// ImageFolder returns torchvision's ImageFolder/DatasetFolder order over
// fsys: classes are the sorted names of root entries that are directories
// (following symlinks, hidden ones included); for each class, every
// directory of os.walk(class, followlinks=True) in order of its full path
// string (so "x", "x y", "x y/deep", "x-y", "x/z"), file names sorted
// within a directory, kept when the lowered name ends with an extension.
// Like torchvision, an empty class is an error.
func ImageFolder(fsys iofs.FS, o ImageFolderOptions) (*Layout, error) {
	root := path.Clean("/" + o.Root)[1:]
	if root == "" {
		root = "."
	}
	exts := o.Extensions
	if exts == nil {
		exts = ImageExtensions
	}
	ents, err := iofs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("imagefolder %s: %w", root, err)
	}
	var classes []string
	for _, e := range ents {
		if isDir(fsys, root, e) {
			classes = append(classes, e.Name())
		}
	}
	slices.Sort(classes)
	if len(classes) == 0 {
		return nil, fmt.Errorf("imagefolder %s: no class directories: %w", root, iofs.ErrNotExist)
	}
	var b layoutBuilder
	for _, c := range classes {
		type dirFiles struct {
			dir   string
			files []string
		}
		var dirs []dirFiles
		var walk func(dir string, depth int)
		walk = func(dir string, depth int) {
			ents, err := iofs.ReadDir(fsys, dir)
			if err != nil {
				return // os.walk ignores directories it cannot list
			}
			var files, subdirs []string
			for _, e := range ents {
				if isDir(fsys, dir, e) {
					subdirs = append(subdirs, e.Name())
				} else if hasExtension(e.Name(), exts) {
					files = append(files, e.Name())
				}
			}
			slices.Sort(files)
			dirs = append(dirs, dirFiles{dir, files})
			if depth < maxWalkDepth {
				for _, s := range subdirs {
					walk(path.Join(dir, s), depth+1)
				}
			}
		}
		classDir := path.Join(root, c)
		walk(classDir, 0)
		// Sorting by the path relative to the class equals Python's sort of
		// the full root strings: they share the class prefix.
		slices.SortFunc(dirs, func(a, b dirFiles) int { return strings.Compare(a.dir, b.dir) })
		n := 0
		for _, d := range dirs {
			for _, f := range d.files {
				b.add(path.Join(d.dir, f))
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("imagefolder %s: class %q has no file with extensions %v (torchvision raises too)", root, c, exts)
		}
	}
	return b.build()
}

// Sorted returns every regular file under root in fsys, sorted by path
// (symlinks are not followed).
func Sorted(fsys iofs.FS, root string) (*Layout, error) {
	root = path.Clean("/" + root)[1:]
	if root == "" {
		root = "."
	}
	var paths []string
	err := iofs.WalkDir(fsys, root, func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sorted layout %s: %w", root, err)
	}
	slices.Sort(paths)
	return NewLayout(paths)
}

// DALIRoot returns the list fn.readers.file(file_root=root) builds: the
// sorted subdirectories of root (following symlinks), and in each the
// sorted names of files (not recursive) matching an extension
// case-insensitively (nil: DALIExtensions).
func DALIRoot(fsys iofs.FS, root string, exts []string) (*Layout, error) {
	root = path.Clean("/" + root)[1:]
	if root == "" {
		root = "."
	}
	if exts == nil {
		exts = DALIExtensions
	}
	ents, err := iofs.ReadDir(fsys, root)
	if err != nil {
		return nil, fmt.Errorf("dali file_root %s: %w", root, err)
	}
	var b layoutBuilder
	for _, c := range ents { // ReadDir sorts by name
		if !isDir(fsys, root, c) {
			continue
		}
		dir := path.Join(root, c.Name())
		files, err := iofs.ReadDir(fsys, dir)
		if err != nil {
			return nil, fmt.Errorf("dali file_root %s: %w", dir, err)
		}
		for _, f := range files {
			t := f.Type()
			if !t.IsRegular() && t&iofs.ModeSymlink == 0 {
				continue
			}
			if hasASCIIFoldSuffix(f.Name(), exts) {
				b.add(path.Join(dir, f.Name()))
			}
		}
	}
	return b.build()
}

func hasASCIIFoldSuffix(name string, exts []string) bool {
	for _, e := range exts {
		if len(name) >= len(e) && strings.EqualFold(name[len(name)-len(e):], e) {
			return true
		}
	}
	return false
}

// ListOptions configures ParseList.
type ListOptions struct {
	// Root is joined in front of every relative path.
	Root string
	// StripPrefix is removed from the front of absolute paths (e.g. the
	// mountpoint the list was written for).
	StripPrefix string
	// Labels parses DALI file_list lines, "path label": the trailing
	// integer label and the blanks before it are dropped.
	Labels bool
}

// ParseList reads one path per line (blank lines skipped) and returns the
// layout in the given order.
func ParseList(r io.Reader, o ListOptions) (*Layout, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var b layoutBuilder
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), " \t\r\v\f")
		if line == "" {
			continue
		}
		if o.Labels {
			i := strings.LastIndexAny(line, " \t")
			if i < 0 || strings.TrimLeft(line[i+1:], "0123456789") != "" {
				return nil, fmt.Errorf("list line %d: want \"path label\", got %q", n, line)
			}
			line = strings.TrimRight(line[:i], " \t")
		}
		p, err := listPath(line, o)
		if err != nil {
			return nil, fmt.Errorf("list line %d: %w", n, err)
		}
		b.add(p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return b.build()
}

func listPath(p string, o ListOptions) (string, error) {
	if strings.HasPrefix(p, "/") {
		pre := strings.TrimSuffix(o.StripPrefix, "/")
		if pre == "" || !strings.HasPrefix(p, pre+"/") {
			return "", fmt.Errorf("absolute path %q outside %q", p, o.StripPrefix)
		}
		p = p[len(pre)+1:]
	} else if o.Root != "" {
		p = o.Root + "/" + p
	}
	// A Root with a leading slash names the mount root too (as Observe
	// ignores a leading slash); paths in a layout are relative.
	c := strings.TrimPrefix(path.Clean(p), "/")
	if c == "" || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", errors.New("path " + p + " leaves the mount")
	}
	return c, nil
}
