#!/usr/bin/env bash
# make bench-scale: ImageNet-scale metadata (issue 10, "Scale"). Generates
# (once; reused between runs) a local source of 1,281,167 empty files in
# 1,000 class directories, then measures:
#   - `find SRC -type f | wc -l` on the source, page cache warm;
#   - a cold mount (list + build + persist the tree) until it is ready;
#   - `find MNT -type f | wc -l` through stallfs, first and second pass
#     (target: within 2x of the source's);
#   - a remount that loads the persisted tree (target: ready in < 10 s),
#     and its find;
#   - the daemon's RSS after each mount and after find, per file, and the
#     size of the metadata file.
# Prints a table; the raw rows go to out/bench-scale.tsv.
#
# Knobs (environment): BENCH_SCALE_FILES (1281167), BENCH_SCALE_CLASSES
# (1000), BENCH_SCALE_DIR (where the source is kept between runs,
# out/scale), BENCH_MOUNT_FLAGS (extra `stallfs mount` flags), BENCH_OUT
# (out/bench-scale.tsv), STALLFS_BIN (bin/stallfs). GOMEMLIMIT, if set,
# reaches the daemon, and the CLI then sets no memory limit of its own
# (docs/scale.md compares GOMEMLIMIT=off with the default).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
files=${BENCH_SCALE_FILES:-1281167}
classes=${BENCH_SCALE_CLASSES:-1000}
data_dir=${BENCH_SCALE_DIR:-out/scale}
out=$(bench_out "${BENCH_OUT:-out/bench-scale.tsv}")
mkdir -p "$data_dir"
src=$(realpath "$data_dir")/imagenet-$files-$classes

work=$(mktemp -d /tmp/stallfs-scale.XXXXXX)
mnt=$work/mnt
cleanup() {
	local rc=$?
	unmount_stallfs "$bin" "$mnt"
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# now: seconds since the epoch, with nanoseconds.
now() { date +%s.%N; }

# since T0: seconds elapsed since T0 (from now), 3 decimals.
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'; }

# gen_source: write the source unless a complete one is there. Empty files
# named like ImageNet's (train/n01440764/n01440764_10026.JPEG); directory
# times are set to 2020 so that the persisted tree can vouch for them (a
# real dataset is older than the 2 s stallfs requires).
gen_source() {
	if [ -f "$src.done" ]; then
		echo "source: $src (reused)"
		return
	fi
	echo "generating $files empty files in $classes directories under $src"
	rm -rf "$src"
	local t0
	t0=$(now)
	python3 - "$src" "$files" "$classes" <<'EOF'
import multiprocessing, os, sys
root, files, classes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def make(c):
    cls = "n%08d" % (1440764 + 7 * c)
    d = os.path.join(root, "train", cls)
    os.makedirs(d)
    n = files // classes + (1 if c < files % classes else 0)
    for i in range(n):
        os.close(os.open(os.path.join(d, "%s_%d.JPEG" % (cls, 7 * i + 3)), os.O_CREAT | os.O_WRONLY, 0o644))

with multiprocessing.Pool(max(2, os.cpu_count())) as pool:
    pool.map(make, range(classes), chunksize=8)
EOF
	find "$src" -type d -exec touch -d @1600000000 {} +
	touch "$src.done"
	echo "  generated in $(since "$t0") s"
}

# count_files DIR LABEL: time `find DIR -type f | wc -l`, check the count,
# and record the row "find LABEL seconds".
count_files() {
	local t0 n s
	t0=$(now)
	n=$(find "$1" -type f | wc -l)
	s=$(since "$t0")
	if [ "$n" -ne "$files" ]; then
		echo "bench-scale: find $1 counted $n files, want $files" >&2
		exit 1
	fi
	printf 'find\t%s\t%s\n' "$2" "$s" >>"$out"
}

# mount_timed LABEL: mount the source (daemon; returns when ready) and
# record "mount LABEL seconds".
mount_timed() {
	local t0
	mkdir -p "$mnt"
	t0=$(now)
	# shellcheck disable=SC2086 # flag list
	"$bin" mount --daemon --log-file "$work/$1.log" --cache-dir "$work/cache" --cache-mem 64MiB --cache-disk 0 \
		${BENCH_MOUNT_FLAGS:-} "$src" "$mnt"
	printf 'mount\t%s\t%s\n' "$1" "$(since "$t0")" >>"$out"
}

# rss LABEL MOUNTLABEL: record the daemon's RSS and peak RSS in bytes.
rss() {
	local pid
	pid=$(grep -o 'pid=[0-9]*' "$work/$2.log" | head -1 | cut -d= -f2)
	awk -v l="$1" '$1 == "VmRSS:" {r = $2} $1 == "VmHWM:" {h = $2} END {printf "rss\t%s\t%d\t%d\n", l, r * 1024, h * 1024}' \
		"/proc/$pid/status" >>"$out"
}

gen_source
: >"$out"
find "$src" -type f | wc -l >/dev/null # warm the page cache
count_files "$src" source

rm -rf "$work/cache"
mount_timed cold
rss cold-mounted cold
count_files "$mnt" mount-cold-1
count_files "$mnt" mount-cold-2
rss cold-after-find cold
tree=$(find "$work/cache" -name tree -type f)
printf 'file\ttree\t%s\n' "$(stat -c %s "$tree")" >>"$out"
"$bin" unmount "$mnt"

mount_timed persisted
if ! grep -q 'directory times unchanged' "$work/persisted.log"; then
	echo "bench-scale: the remount did not use the persisted tree:" >&2
	cat "$work/persisted.log" >&2
	exit 1
fi
rss persisted-mounted persisted
count_files "$mnt" mount-persisted
rss persisted-after-find persisted
"$bin" unmount "$mnt"

echo
echo "$files files in $classes directories (empty); $(host_summary); extra mount flags: ${BENCH_MOUNT_FLAGS:-(none)}"
echo
awk -F'\t' -v files="$files" '
$1 == "find" { find[$2] = $3 }
$1 == "mount" { mount[$2] = $3 }
$1 == "rss" { rss[$2] = $3; hwm[$2] = $4 }
$1 == "file" { tree = $3 }
function mib(b) { return sprintf("%.0f MiB", b / 1048576) }
function perfile(b) { return sprintf("%.0f B/file", b / files) }
END {
	print "| step | seconds | vs source find | daemon RSS (peak) |"
	print "| --- | ---: | ---: | --- |"
	printf "| find SRC -type f (page cache warm) | %.2f | 1.00 | |\n", find["source"]
	printf "| mount, cold (list + build + persist) | %.2f | | %s (%s), %s |\n", mount["cold"], mib(rss["cold-mounted"]), mib(hwm["cold-mounted"]), perfile(rss["cold-mounted"])
	printf "| find MNT -type f, 1st | %.2f | %.2f | |\n", find["mount-cold-1"], find["mount-cold-1"] / find["source"]
	printf "| find MNT -type f, 2nd | %.2f | %.2f | %s after find |\n", find["mount-cold-2"], find["mount-cold-2"] / find["source"], mib(rss["cold-after-find"])
	printf "| remount, persisted tree | %.2f | | %s (%s), %s |\n", mount["persisted"], mib(rss["persisted-mounted"]), mib(hwm["persisted-mounted"]), perfile(rss["persisted-mounted"])
	printf "| find MNT -type f after remount | %.2f | %.2f | %s after find |\n", find["mount-persisted"], find["mount-persisted"] / find["source"], mib(rss["persisted-after-find"])
	printf "\nmetadata file: %s (%s)\n", mib(tree), perfile(tree)
}' "$out"
