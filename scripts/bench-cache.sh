#!/usr/bin/env bash
# make bench-cache: the page cache against stallfs's MinIO cache, same memory,
# same data, same random orders (issue 3).
#
# A generated dataset of D bytes (~110 KB files) on local disk is read
# 4 epochs, every file once per epoch, each epoch in a fresh seeded
# permutation (scripts/epoch-reader -seed E, identical for both sides), at
# cache fractions f = 0.25, 0.5, 0.75:
#   baseline  the reader in a memory cgroup limited to f x D plus a small
#             allowance for its own RSS (cgroup v2 memory.max, else v1
#             memory.limit_in_bytes), caches dropped (sync; drop_caches=3)
#             before its first epoch; device bytes per epoch are the reader
#             shell's read_bytes delta in /proc/PID/io (it includes every
#             reaped child, so the reader's reads and their readahead).
#   stallfs   the same reader over `stallfs mount --cache-mem f x D` (direct
#             I/O); backend bytes per epoch are the daemon's rchar delta in
#             /proc/DAEMON/io (the local backend's preads, plus the FUSE
#             requests the daemon reads from /dev/fuse: about 100 bytes per
#             request, listed separately as an upper bound of the noise),
#             and stallfs's own count (stats bytes_by_source.backend) beside.
# Each is printed against the MinIO ideal (1 - f) x D.
#
# Knobs (environment): BENCH_BYTES (2GiB), BENCH_FRACTIONS ("0.25 0.5 0.75"),
# BENCH_EPOCHS (4), BENCH_READERS (4), BENCH_ALLOWANCE_MIB (reader RSS
# allowance in the cgroup, 16), BENCH_DATA (reuse a dataset directory),
# BENCH_OUT (raw rows, out/bench-cache.tsv), STALLFS_BIN (bin/stallfs).
# Needs root (cgroups, drop_caches, FUSE).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
bytes=${BENCH_BYTES:-2GiB}
fractions=${BENCH_FRACTIONS:-0.25 0.5 0.75}
epochs=${BENCH_EPOCHS:-4}
readers=${BENCH_READERS:-4}
allowance=$((${BENCH_ALLOWANCE_MIB:-16} << 20))
out=$(bench_out "${BENCH_OUT:-out/bench-cache.tsv}")

[ "$(id -u)" = 0 ] || { echo "bench-cache: needs root (cgroups, drop_caches, FUSE)" >&2; exit 1; }

# The memory controller (cgroup v2 or v1): scripts/lib.sh.
mem_cgroup stallfs-bench-cache

work=$(mktemp -d /tmp/stallfs-bench-cache.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
	local rc=$?
	unmount_stallfs "$bin" "$mnt"
	if [ -d "$cg" ]; then
		# Move anything left back to the root and remove the group.
		while read -r pid; do echo "$pid" >"$cgroot/cgroup.procs" || true; done <"$cg/cgroup.procs"
		rmdir "$cg" || true
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

reader=$(build_reader "$work")

data=$(bench_data "$work" "$bytes")
D=$(find "$data" -type f -printf '%s\n' | awk '{s += $1} END {printf "%d", s}')
N=$(find "$data" -type f | wc -l)
echo "dataset: $N files, $D bytes; cgroup $cgver ($cgroot/.../$cglimit), reader allowance $allowance bytes"

# ctl MNT PATH: GET PATH of the mount's control socket (`stallfs cache info
# --json` is refused by the CLI today: "unknown flag --json").
ctl() {
	curl -sf --unix-socket "$(python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.stallfs.control").decode())' "$1")" "http://stallfs$2"
}
io_field() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/io"; }

: >"$out"
printf 'side\tf\tepoch\tbytes\tideal\tstallfs_stats_backend\tdaemon_read_syscalls\tseconds\n' >>"$out"

# mount_epochs BUDGET: mount with a memory tier of BUDGET bytes, read
# $epochs epochs and print per epoch "rchar_delta syscr_delta stats_delta
# seconds", then "used USED_BYTES" (the memory tier's fill).
mount_epochs() {
	local log=$work/stallfs-$1.log pid prev=0 e r0 r1 q0 q1 t0 t1 st
	# The Go runtime re-reads its cgroup's CPU limit every second (a few
	# bytes of rchar) unless told not to.
	GODEBUG=updatemaxprocs=0 "$bin" mount --daemon --log-file "$log" --cache-mem "$1" "$data" "$mnt"
	pid=$(grep -o 'pid=[0-9]*' "$log" | head -1 | cut -d= -f2)
	for e in $(seq 1 "${2:-$epochs}"); do
		r0=$(io_field "$pid" rchar); q0=$(io_field "$pid" syscr); t0=$(date +%s.%N)
		"$reader" -dir "$mnt" -epochs 1 -readers "$readers" -seed "$e" -format tsv >/dev/null
		# close(2) does not wait for FUSE RELEASE; a STATFS is queued behind
		# the last ones, so once it returns the daemon has read them all.
		stat -f "$mnt" >/dev/null
		r1=$(io_field "$pid" rchar); q1=$(io_field "$pid" syscr); t1=$(date +%s.%N)
		st=$("$bin" stats --json "$mnt" | jq '.totals.bytes_by_source.backend')
		echo "$((r1 - r0)) $((q1 - q0)) $((st - prev)) $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
		prev=$st
	done
	echo "used $(ctl "$mnt" /v1/cache | jq '.info.memory.used_bytes') rss $(awk '$1 == "VmRSS:" {print $2 * 1024}' "/proc/$pid/status")"
	"$bin" unmount "$mnt"
}

# Calibration: with every item cached (memory tier > D), epoch 2 reads
# nothing from the backend, so the daemon's rchar delta is the bytes of the
# FUSE requests alone for one epoch (the same requests in every epoch: the
# reader reads each file the same way). It is subtracted below.
echo "calibrating the FUSE request bytes of one epoch (memory tier > D)"
noise=$(mount_epochs $((D + D / 10 + (64 << 20))) 2 | awk 'NR == 2 {print $1}')
echo "  FUSE request bytes per epoch: $noise"

for f in $fractions; do
	budget=$(awk -v f="$f" -v d="$D" 'BEGIN {printf "%d", f * d}')
	ideal=$(awk -v f="$f" -v d="$D" 'BEGIN {printf "%d", (1 - f) * d}')

	# Baseline: the reader in a memory cgroup of f x D (+ allowance).
	mkdir "$cg"
	echo $((budget + allowance)) >"$cg/$cglimit"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	# shellcheck disable=SC2016 # expanded by the inner shell
	bash -c '
		echo $$ >"$1/cgroup.procs"
		rb() { awk "\$1 == \"read_bytes:\" {print \$2}" /proc/$$/io; }
		for e in $(seq 1 "$2"); do
			b0=$(rb); t0=$(date +%s.%N)
			"$3" -dir "$4" -epochs 1 -readers "$5" -seed "$e" -format tsv >/dev/null
			b1=$(rb); t1=$(date +%s.%N)
			echo "$e $((b1 - b0)) $(awk -v a="$t0" -v b="$t1" "BEGIN {printf \"%.2f\", b - a}")"
		done' bench "$cg" "$epochs" "$reader" "$data" "$readers" |
		while read -r e b s; do
			printf 'baseline\t%s\t%s\t%s\t%s\t\t\t%s\n' "$f" "$e" "$b" "$ideal" "$s" >>"$out"
		done
	peak=$(cat "$cg/memory.max_usage_in_bytes" 2>/dev/null || cat "$cg/memory.peak" 2>/dev/null || echo '?')
	echo "  f=$f baseline done (cgroup limit $((budget + allowance)) bytes, peak usage $peak bytes)"
	rmdir "$cg"

	# stallfs: the same reader over a mount whose memory tier is f x D.
	sync
	echo 3 >/proc/sys/vm/drop_caches
	e=0
	while read -r a b c d; do
		if [ "$a" = used ]; then
			echo "  f=$f stallfs done (memory tier $budget bytes, used $b; daemon RSS $d bytes)"
			printf 'used\t%s\t\t%s\t\t\t\t\n' "$f" "$b" >>"$out"
			continue
		fi
		e=$((e + 1))
		printf 'stallfs\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$f" "$e" "$a" "$ideal" "$c" "$b" "$d" >>"$out"
	done < <(mount_epochs "$budget")
done

echo
echo "D = $D bytes ($N files), $epochs epochs, $readers readers, fresh permutation per epoch (seed = epoch)"
echo "ideal = (1 - f) x D. stallfs backend bytes = daemon rchar delta - $noise (FUSE request bytes of one epoch, calibrated);"
echo "exact MinIO = D - bytes held by the memory tier; stallfs stats = the mount's own count of bytes served from the backend."
echo
awk -F'\t' -v D="$D" -v noise="$noise" 'NR > 1 {
	k = $2 SUBSEP $3; if ($1 != "used") ideal[$2] = $5
	if ($1 == "baseline") base[k] = $4
	else if ($1 == "used") used[$2] = $4
	else { st[k] = $4 - noise; own[k] = $6 }
}
END {
	print "| f | epoch | page cache: device bytes | / ideal | stallfs: backend bytes | / ideal | exact MinIO (D - cached) | stallfs stats | ideal (1-f) x D |"
	print "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	n = split("'"$fractions"'", fr, " ")
	for (i = 1; i <= n; i++) for (e = 1; e <= '"$epochs"'; e++) {
		k = fr[i] SUBSEP e; id = ideal[fr[i]]
		printf "| %s | %d | %.0f | %.3f | %.0f | %.4f | %.0f | %.0f | %.0f |\n", fr[i], e, base[k], base[k] / id, st[k], st[k] / id, (e == 1 ? D : D - used[fr[i]]), own[k], id
	}
}' "$out"
echo
echo "raw rows: $out"
