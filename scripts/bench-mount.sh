#!/usr/bin/env bash
# make bench, mount part: read a generated ~1 GiB ImageNet-like dataset
# direct from disk and through a stallfs mount of it, with 1, 4 and 16
# concurrent readers, page cache warm for both (one untimed pass each
# first), and print files/s, MB/s and the ratio stallfs/direct.
#
# Knobs (environment): BENCH_BYTES (1GiB), BENCH_READERS ("1 4 16"),
# BENCH_EPOCHS (measured epochs per point, 2), BENCH_DATA (reuse an existing
# dataset directory instead of generating one), BENCH_MOUNT_FLAGS (extra
# `stallfs mount` flags, e.g. --kernel-cache), BENCH_OUT (raw rows, default
# out/bench-mount.tsv), STALLFS_BIN (bin/stallfs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
bytes=${BENCH_BYTES:-1GiB}
readers=${BENCH_READERS:-1 4 16}
epochs=${BENCH_EPOCHS:-2}
out=$(bench_out "${BENCH_OUT:-out/bench-mount.tsv}")

work=$(mktemp -d /tmp/stallfs-bench.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
	local rc=$?
	unmount_stallfs "$bin" "$mnt"
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

reader=$(build_reader "$work")

data=$(bench_data "$work" "$bytes")

# shellcheck disable=SC2086 # BENCH_MOUNT_FLAGS is a list of flags
"$bin" mount --daemon --log-file "$work/stallfs.log" ${BENCH_MOUNT_FLAGS:-} "$data" "$mnt"

echo "warming the page cache (one untimed pass direct, one through stallfs)"
"$reader" -dir "$data" -epochs 1 -readers 4 -format tsv >/dev/null
"$reader" -dir "$mnt" -epochs 1 -readers 4 -format tsv >/dev/null

: >"$out"
for r in $readers; do
	read_epochs "$data" direct "$r"
	read_epochs "$mnt" stallfs "$r"
	echo "  $r reader(s) done"
done
"$bin" unmount "$mnt"

echo
echo "dataset: $(rows_summary "$out"); $epochs measured epochs per point after a warm pass; $(host_summary)"
echo "mount flags: ${BENCH_MOUNT_FLAGS:-(defaults)}"
echo
# Rows: label epoch readers files bytes seconds MB/s files/s. Rates are
# totals over the measured epochs (bytes / seconds).
awk -F'\t' '
{
	k = $3; seen[k] = 1
	b[$1, k] += $5; f[$1, k] += $4; s[$1, k] += $6
}
END {
	print "| readers | direct MB/s | direct files/s | stallfs MB/s | stallfs files/s | stallfs/direct |"
	print "| ---: | ---: | ---: | ---: | ---: | ---: |"
	n = split("'"$readers"'", rs, " ")
	for (i = 1; i <= n; i++) {
		k = rs[i]
		dm = b["direct", k] / 1e6 / s["direct", k]; df = f["direct", k] / s["direct", k]
		sm = b["stallfs", k] / 1e6 / s["stallfs", k]; sf = f["stallfs", k] / s["stallfs", k]
		printf "| %d | %.0f | %.0f | %.0f | %.0f | %.2f |\n", k, dm, df, sm, sf, sm / dm
	}
}' "$out"
echo
echo "raw rows: $out"
