#!/usr/bin/env bash
# make bench, mount part: the cost of a cache hit. Reads a generated ~1 GiB
# ImageNet-like dataset (~110 KB files) directly from disk (page cache warm)
# and through two stallfs mounts of it whose memory tier holds everything:
# the default hit path (direct I/O) and --kernel-cache (OPEN answered
# ENOSYS, the kernel keeps the pages of items the tier holds). 1, 4 and 16
# concurrent readers, one untimed pass of each first, then BENCH_ROUNDS
# rounds of one epoch per side back to back: on a shared, noisy machine the
# ratio of two epochs of the same round is far steadier than either rate,
# so the table gives files/s over all rounds and the median and range of
# the per-round ratios. Then one 1 GiB file read sequentially (dd bs=1M),
# interleaved direct / direct I/O / --kernel-cache, median of
# BENCH_BIG_RUNS. Also each daemon's RSS against its memory tier, and the
# page cache its files hold (fincore).
#
# Knobs (environment): BENCH_BYTES (1GiB), BENCH_READERS ("1 4 16"),
# BENCH_ROUNDS (5; BENCH_EPOCHS is read as the same), BENCH_DATA (reuse an existing
# dataset directory instead of generating one), BENCH_MOUNT_FLAGS (extra
# `stallfs mount` flags for both mounts), BENCH_BIG (size of the large
# file, 1GiB; 0: skip it), BENCH_BIG_RUNS (7), BENCH_OUT (raw rows, default
# out/bench-mount.tsv), STALLFS_BIN (bin/stallfs).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
bytes=${BENCH_BYTES:-1GiB}
readers=${BENCH_READERS:-1 4 16}
rounds=${BENCH_ROUNDS:-${BENCH_EPOCHS:-5}}
big=${BENCH_BIG:-1GiB}
big_runs=${BENCH_BIG_RUNS:-7}
out=$(bench_out "${BENCH_OUT:-out/bench-mount.tsv}")
modes="direct-io kernel-cache"

work=$(mktemp -d /tmp/stallfs-bench.XXXXXX)
cleanup() {
	local rc=$? m
	for m in "$work"/mnt-*; do
		[ -d "$m" ] && unmount_stallfs "$bin" "$m"
	done
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

reader=$(build_reader "$work")
data=$(bench_data "$work" "$bytes")
D=$(du -sb "$data" | cut -f1)

# mode_flags MODE: the stallfs mount flags of MODE.
mode_flags() {
	case $1 in
	direct-io) echo "" ;;
	kernel-cache) echo "--kernel-cache" ;;
	esac
}

# mount_mode SRC MNT MODE BUDGET: mount SRC on MNT in MODE with a memory
# tier of BUDGET bytes (a daemon logging to MNT.log).
mount_mode() {
	mkdir -p "$2"
	# shellcheck disable=SC2046,SC2086 # flag lists
	"$bin" mount --daemon --log-file "$2.log" --cache-mem "$4" $(mode_flags "$3") ${BENCH_MOUNT_FLAGS:-} "$1" "$2"
}

# rss_line MNT: "RSS MiB (tier used MiB of budget MiB)" of the daemon of MNT.
rss_line() {
	local pid used
	pid=$(grep -o 'pid=[0-9]*' "$1.log" | head -1 | cut -d= -f2)
	used=$("$bin" cache info --json "$1" 2>/dev/null | python3 -c 'import json, sys; m = json.load(sys.stdin)["info"]["memory"]; print(m["used_bytes"], m["budget_bytes"])' 2>/dev/null || echo "? ?")
	awk -v u="${used% *}" -v b="${used#* }" '$1 == "VmRSS:" {printf "RSS %.0f MiB, memory tier %s of %s MiB", $2 / 1024, (u == "?" ? "?" : sprintf("%.0f", u / 1048576)), (b == "?" ? "?" : sprintf("%.0f", b / 1048576))}' "/proc/$pid/status"
}

budget=$((D + D / 10 + (64 << 20)))
for mode in $modes; do
	mount_mode "$data" "$work/mnt-$mode" "$mode" "$budget"
done

echo "warming (one untimed pass direct, one through each mount: fills the memory tiers and, with --kernel-cache, the kept pages)"
"$reader" -dir "$data" -epochs 1 -readers 4 -format tsv >/dev/null
for mode in $modes; do
	"$reader" -dir "$work/mnt-$mode" -epochs 1 -readers 4 -format tsv >/dev/null
done

: >"$out"
# round_epoch DIR LABEL READERS ROUND: read DIR once with READERS readers
# in the seeded random order of ROUND and append the row, labelled LABEL,
# with ROUND as its epoch column, to $out.
round_epoch() {
	"$reader" -dir "$1" -epochs 1 -readers "$3" -seed "$4" -format tsv -label "$2" |
		awk -F'\t' -v OFS='\t' -v rd="$4" '{$2 = rd; print}' >>"$out"
}
for r in $readers; do
	for round in $(seq "$rounds"); do
		round_epoch "$data" direct "$r" "$round"
		for mode in $modes; do
			round_epoch "$work/mnt-$mode" "$mode" "$r" "$round"
		done
	done
	echo "  $r reader(s) done"
done
# kept_mib MNT: MiB of MNT's files in the page cache (fincore).
kept_mib() {
	find "$1" -type f -print0 | xargs -0 fincore -b -n -o RES 2>/dev/null | awk '{s += $1} END {printf "%.0f", s / 1048576}'
}
declare -A rss
for mode in $modes; do
	rss[$mode]="$(rss_line "$work/mnt-$mode"); page cache $(kept_mib "$work/mnt-$mode") MiB"
	"$bin" unmount "$work/mnt-$mode"
done

echo
echo "dataset: $(rows_summary "$out"); $rounds rounds of one epoch per side after a warm pass; $(host_summary)"
echo "memory tier: $budget bytes (holds the whole dataset); extra mount flags: ${BENCH_MOUNT_FLAGS:-(none)}"
echo
# Rows: label round readers files bytes seconds MB/s files/s.
awk -F'\t' -v readers="$readers" -v modes="$modes" '
function median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ f[$1, $3] += $4; s[$1, $3] += $6; fps[$1, $3, $2] = $8; if ($2 > nr) nr = $2 }
END {
	nm = split(modes, ms, " ")
	printf "| readers | direct files/s |"
	for (j = 1; j <= nm; j++) printf " %s files/s | %s / direct, median (range) |", ms[j], ms[j]
	print ""
	printf "| ---: | ---: |"
	for (j = 1; j <= nm; j++) printf " ---: | ---: |"
	print ""
	n = split(readers, rs, " ")
	for (i = 1; i <= n; i++) {
		k = rs[i]
		printf "| %d | %.0f |", k, f["direct", k] / s["direct", k]
		for (j = 1; j <= nm; j++) {
			lo = 1e9; hi = 0
			for (e = 1; e <= nr; e++) {
				q[e] = fps[ms[j], k, e] / fps["direct", k, e]
				lo = q[e] < lo ? q[e] : lo; hi = q[e] > hi ? q[e] : hi
			}
			printf " %.0f | %.2f (%.2f-%.2f) |", f[ms[j], k] / s[ms[j], k], median(q, nr), lo, hi
		}
		print ""
	}
}' "$out"
echo
for mode in $modes; do
	echo "daemon $mode: ${rss[$mode]}"
done

if [ "$big" != 0 ]; then
	echo
	mkdir -p "$work/big"
	head -c "$(numfmt --from=iec "${big%iB}")" /dev/urandom >"$work/big/big"
	bigb=$(stat -c %s "$work/big/big")
	for mode in $modes; do
		mount_mode "$work/big" "$work/mnt-big-$mode" "$mode" $((bigb + bigb / 10 + (64 << 20)))
	done
	# dd_secs FILE: seconds dd takes to read FILE with 1 MiB reads.
	dd_secs() { dd if="$1" of=/dev/null bs=1M 2>&1 | awk '/copied/ {print $(NF-3)}'; }
	dd_secs "$work/big/big" >/dev/null
	for mode in $modes; do dd_secs "$work/mnt-big-$mode/big" >/dev/null; done
	: >"$work/big.tsv"
	for _ in $(seq "$big_runs"); do
		echo -e "direct\t$(dd_secs "$work/big/big")" >>"$work/big.tsv"
		for mode in $modes; do
			echo -e "$mode\t$(dd_secs "$work/mnt-big-$mode/big")" >>"$work/big.tsv"
		done
	done
	for mode in $modes; do
		rss[$mode]="$(rss_line "$work/mnt-big-$mode"); page cache $(kept_mib "$work/mnt-big-$mode") MiB"
		"$bin" unmount "$work/mnt-big-$mode"
	done
	echo "large file: $bigb bytes, dd bs=1M, median of $big_runs interleaved runs after a warm read"
	echo
	echo "| reader | median s | GB/s | / direct |"
	echo "| --- | ---: | ---: | ---: |"
	for l in direct $modes; do
		awk -F'\t' -v l="$l" '$1 == l {print $2}' "$work/big.tsv" | sort -g | awk -v n="$big_runs" '{v[NR] = $1} END {print v[int((n + 1) / 2)]}'
	done | awk -v labels="direct $modes" -v b="$bigb" '
	{ m[NR] = $1 }
	END {
		n = split(labels, ls, " ")
		for (i = 1; i <= n; i++) printf "| %s | %.3f | %.2f | %.2f |\n", ls[i], m[i], b / m[i] / 1e9, m[1] / m[i]
	}'
	echo
	for mode in $modes; do
		echo "daemon $mode (large file): ${rss[$mode]}"
	done
	cat "$work/big.tsv" >>"$out"
fi
echo
echo "raw rows: $out"
