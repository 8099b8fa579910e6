# shellcheck shell=bash
# scripts/lib.sh: shell functions shared by the bench-*.sh scripts. Source it
# from the repository root (`. scripts/lib.sh`, after the script's `cd`); it
# defines functions only and runs nothing.

# bench_out PATH: make PATH's directory and print PATH made absolute (the
# raw rows file of a benchmark).
bench_out() {
	mkdir -p "$(dirname "$1")"
	realpath "$1"
}

# need_rclone: install Debian's rclone when there is none.
need_rclone() {
	if ! command -v rclone >/dev/null; then
		echo "installing rclone"
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rclone
	fi
}

# unmount_fuse DIR...: unmount each DIR that is mounted (fusermount3, else a
# lazy umount); never fails.
unmount_fuse() {
	local m
	for m in "$@"; do
		if grep -qs " $m " /proc/self/mountinfo; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" || true
		fi
	done
}

# unmount_stallfs BIN DIR: unmount the stallfs mount at DIR if it is mounted
# (`BIN unmount`, else `BIN unmount --lazy`); never fails.
unmount_stallfs() {
	if grep -qs " $2 " /proc/self/mountinfo; then
		"$1" unmount "$2" 2>/dev/null || "$1" unmount --lazy "$2" || true
	fi
}

# stop_pid PID: kill and reap PID, a child of this shell; nothing when PID is
# empty; never fails.
stop_pid() {
	if [ -n "$1" ]; then
		kill "$1" 2>/dev/null || true
		wait "$1" 2>/dev/null || true
	fi
}

# free_port FIRST: print the first port from FIRST up that nothing on
# 127.0.0.1 answers on.
free_port() {
	local port=$1
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
	echo "$port"
}

# wait_port PORT PID LOG TRIES: poll 127.0.0.1:PORT every 50 ms, at most
# TRIES times, until something answers; if PID (the server) exits first,
# print LOG to stderr and exit the script with 1.
wait_port() {
	local _
	for _ in $(seq "$4"); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		kill -0 "$2" || { cat "$3" >&2; exit 1; }
		sleep 0.05
	done
}

# wait_mounted DIR: poll every 50 ms, at most 30 s, until DIR is mounted;
# else say so (prefixed with the script's name) and return 1.
wait_mounted() {
	local _
	for _ in $(seq 600); do
		grep -qs " $1 " /proc/self/mountinfo && return 0
		sleep 0.05
	done
	echo "$(basename "$0" .sh): $1 did not mount" >&2
	return 1
}

# build_reader WORK: build scripts/epoch-reader into WORK and print its path.
# (Functions meant for $(...) return on failure themselves: bash does not
# carry set -e into command substitutions.)
build_reader() {
	go build -o "$1/epoch-reader" ./scripts/epoch-reader || return
	echo "$1/epoch-reader"
}

# bench_data WORK BYTES: print the dataset directory: BENCH_DATA made
# absolute when set, else WORK/data, where a ~BYTES ImageNet-like dataset is
# generated first (seed 1; the progress line goes to stderr).
bench_data() {
	if [ -n "${BENCH_DATA:-}" ]; then
		realpath "$BENCH_DATA"
		return
	fi
	echo "generating a ~$2 ImageNet-like dataset in $1/data" >&2
	go run ./scripts/gen-dataset -out "$1/data" -bytes "$2" -seed 1 >&2 || return
	echo "$1/data"
}

# rows_summary OUT: print "N files, S GB" from the first epoch-reader row
# of OUT (rows: label epoch readers files bytes seconds MB/s files/s).
rows_summary() {
	awk 'NR==1 {printf "%s files, %.2f GB", $4, $5/1e9}' "$1"
}

# host_summary: print "C cores, M GiB" for this machine.
host_summary() {
	echo "$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
}

# epoch_table OUT: print a markdown table of MB/s and files/s per epoch,
# one column pair per label, from the epoch-reader rows of OUT (rows: label
# epoch readers files bytes seconds MB/s files/s), labels in first-seen
# order.
epoch_table() {
	awk -F'\t' '
{ if (!($1 in order)) { order[$1] = ++n; name[n] = $1 } mbs[$1, $2] = $7; fps[$1, $2] = $8; if ($2 > maxe) maxe = $2 }
END {
	printf "| epoch |"; for (i = 1; i <= n; i++) printf " %s MB/s | %s files/s |", name[i], name[i]; print ""
	printf "| ---: |"; for (i = 1; i <= n; i++) printf " ---: | ---: |"; print ""
	for (e = 1; e <= maxe; e++) {
		printf "| %d |", e
		for (i = 1; i <= n; i++) printf " %.0f | %.0f |", mbs[name[i], e], fps[name[i], e]
		print ""
	}
}' "$1"
}

# The epoch-reader runs below use the caller's globals: reader (the
# epoch-reader binary), epochs, readers, out (the raw rows file) and, for
# rclone_epochs, work, cache and modes.

# read_epochs DIR LABEL READERS: read DIR for $epochs epochs with READERS
# readers in the seeded random order (seed 7) and append the rows, labelled
# LABEL, to $out.
read_epochs() {
	"$reader" -dir "$1" -epochs "$epochs" -readers "$3" -seed 7 -format tsv -label "$2" | tee -a "$out" >/dev/null
}

# verify_mount DIR SRC: with BENCH_VERIFY=1, read DIR once with $readers
# readers and check every byte against SRC; else nothing.
verify_mount() {
	if [ "${BENCH_VERIFY:-0}" = 1 ]; then
		"$reader" -dir "$1" -epochs 1 -readers "$readers" -verify-dir "$2" -format tsv >/dev/null
		echo "  every byte verified"
	fi
}

# rclone_epochs REMOTE RCLONE...: for each --vfs-cache-mode in $modes,
# mount REMOTE read-only with `RCLONE... mount` (rclone, or a wrapper of it)
# on $work/mnt-rclone-MODE (disk cache in $work/rclone-cache, at most
# $cache), read_epochs it as rclone-MODE with $readers readers, and unmount.
rclone_epochs() {
	local remote=$1 mode m
	shift
	for mode in $modes; do
		m=$work/mnt-rclone-$mode
		mkdir -p "$m"
		echo "rclone mount --vfs-cache-mode $mode: $epochs epochs, $readers readers"
		"$@" mount "$remote" "$m" --read-only --daemon --vfs-cache-mode "$mode" \
			--cache-dir "$work/rclone-cache" --vfs-cache-max-size "$cache" --dir-cache-time 1h \
			--log-file "$work/rclone-$mode.log"
		wait_mounted "$m"
		read_epochs "$m" "rclone-$mode" "$readers"
		fusermount3 -u "$m"
	done
}

# mem_cgroup NAME: find the memory controller (cgroup v2 if it offers memory,
# else v1) and set cgroot, cglimit (the limit file), cgpeak (the peak usage
# file), cgfile (the page-cache key of memory.stat), cgver and cg (the path of
# a new cgroup NAME-$$, not created yet). Exits when there is none.
mem_cgroup() {
	if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		cgroot=/sys/fs/cgroup cglimit=memory.max cgpeak=memory.peak cgfile=file cgver=v2
		grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || echo +memory >/sys/fs/cgroup/cgroup.subtree_control
	elif [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
		cgroot=/sys/fs/cgroup/memory cglimit=memory.limit_in_bytes cgpeak=memory.max_usage_in_bytes cgfile=cache cgver=v1
	else
		echo "$1: no cgroup memory controller (neither v2 memory.max nor v1 memory.limit_in_bytes)" >&2
		exit 1
	fi
	cg=$cgroot/$1-$$
}

# shuffle_seeded SEED FILE prints FILE's lines in a permutation fixed by
# SEED (an integer). Not `shuf --random-source=<(yes SEED)`: a repeated
# byte stream gives nearly the same permutation for every seed.
shuffle_seeded() {
	awk -v seed="$1" 'BEGIN {srand(seed)} {printf "%.17f\t%s\n", rand(), $0}' "$2" |
		sort -t$'\t' -k1,1 | cut -f2-
}

# versitygw_bin prints the absolute path of the versitygw (S3 server)
# binary: $STALLFS_VERSITYGW, else .cache/bin/versitygw, built there once
# at the version the tests pin (backend/s3/s3test) if missing.
versitygw_bin() {
	local vgw=${STALLFS_VERSITYGW:-.cache/bin/versitygw}
	if [ ! -x "$vgw" ]; then
		local v
		v=$(sed -n 's/^const Version = "\(v[0-9.]*\)"/\1/p' backend/s3/s3test/s3test.go)
		echo "building versitygw $v into .cache/bin (once)" >&2
		GOBIN=$PWD/.cache/bin go install "github.com/versity/versitygw/cmd/versitygw@$v" >&2
		vgw=.cache/bin/versitygw
	fi
	realpath "$vgw"
}
