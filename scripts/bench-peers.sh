#!/usr/bin/env bash
# make bench-peers: the peer group's partitioned cache (issue 8).
#
# One generated dataset of D bytes on local disk is the shared source of
# N = 1, 2, 3 stallfs mounts on 127.0.0.1, each with a memory cache of D/3
# and a throttled backend (--backend-latency 20ms --backend-bandwidth
# 100MB/s, per mount). Each epoch the dataset is shuffled (seed = epoch)
# and dealt to the mounts DistributedSampler style (line i of the shuffled
# manifest to mount i mod N); each mount reads its shard with
# scripts/epoch-reader (8 threads, every byte verified against the
# manifest's sha256), all mounts at once, for 3 epochs. Per epoch it prints the slowest mount's
# time, the group's backend bytes and peer bytes (the sum of the mounts'
# GET /v1/peers fills counters) against the ideal max(0, D - N x D/3) from
# epoch 2 on, and the peer-served and local-hit read rates.
#
# Knobs (environment): BENCH_BYTES (2GiB), BENCH_MOUNTS ("1 2 3"),
# BENCH_EPOCHS (3), BENCH_READERS (8 per mount), BENCH_LATENCY (20ms),
# BENCH_BANDWIDTH (100MB/s), BENCH_DATA (reuse a dataset directory),
# BENCH_OUT (raw rows, out/bench-peers.tsv), STALLFS_BIN (bin/stallfs),
# BENCH_PORT (first port, 17170). Needs FUSE (root).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
bytes=${BENCH_BYTES:-2GiB}
mounts=${BENCH_MOUNTS:-1 2 3}
epochs=${BENCH_EPOCHS:-3}
readers=${BENCH_READERS:-8}
latency=${BENCH_LATENCY:-20ms}
bandwidth=${BENCH_BANDWIDTH:-100MB/s}
port0=${BENCH_PORT:-17170}
out=${BENCH_OUT:-out/bench-peers.tsv}
mkdir -p "$(dirname "$out")"
out=$(realpath "$out")

work=$(mktemp -d /tmp/bench-peers.XXXXXX)
mnts=()
cleanup() {
	local m
	for m in "${mnts[@]}"; do unmount_stallfs "$bin" "$m"; done
	rm -rf "$work"
}
trap cleanup EXIT

data=${BENCH_DATA:-$work/data}
if [ ! -d "$data/train" ]; then
	go run ./scripts/gen-dataset -out "$data" -bytes "$bytes" -classes 100 -seed 7 -manifest "$data/manifest.tsv" >&2
fi
sed 's|^train/||' "$data/manifest.tsv" >"$work/manifest"
go build -o "$work/epoch-reader" ./scripts/epoch-reader
D=$(awk -F'\t' '{s += $2} END {print s}' "$work/manifest")
py=$(command -v /usr/bin/python3 || command -v python3)
share=$((D / 3))
printf 'secret-%s\n' "$RANDOM$RANDOM" >"$work/secret"
chmod 600 "$work/secret"

# sock MNT prints the mount's control socket (its user.stallfs.control
# xattr).
sock() {
	getfattr --only-values -n user.stallfs.control "$1" 2>/dev/null ||
		"$py" -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.stallfs.control").decode())' "$1"
}
# sum FIELD sums .fills.FIELD of GET /v1/peers over the mounts' sockets.
sum() {
	local total=0 v s
	for s in "${socks[@]}"; do
		v=$(curl -s --unix-socket "$s" http://stallfs/v1/peers | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p")
		total=$((total + v))
	done
	echo "$total"
}

echo "dataset: $D bytes; memory cache per mount: $share bytes; backend per mount: $latency, $bandwidth" >&2
printf 'mounts\tepoch\tseconds\tbackend_bytes\tideal_backend_bytes\tpeer_bytes\tread_bytes\n' >"$out"
printf '%-7s %-6s %9s %14s %14s %14s %10s\n' mounts epoch seconds backend_B ideal_B peer_B MB/s
for n in $mounts; do
	list=""
	for i in $(seq 0 $((n - 1))); do list="$list${list:+,}127.0.0.1:$((port0 + i))"; done
	mnts=() socks=()
	for i in $(seq 0 $((n - 1))); do
		m="$work/mnt$n.$i"
		mkdir -p "$m"
		"$bin" mount --daemon --cache-mem "$share" --backend-latency "$latency" --backend-bandwidth "$bandwidth" \
			--peers "$list" --peer-listen "127.0.0.1:$((port0 + i))" --peer-secret-file "$work/secret" \
			"$data/train" "$m" >"$work/log$n.$i" 2>&1 || { cat "$work/log$n.$i" >&2; exit 1; }
		mnts+=("$m")
		socks+=("$(sock "$m")")
	done
	for e in $(seq 1 "$epochs"); do
		b0=$(sum backend_bytes)
		p0=$(sum peer_bytes)
		start=$(date +%s.%N)
		pids=()
		shuffle_seeded "$((e * 7919))" "$work/manifest" >"$work/order"
		for i in "${!mnts[@]}"; do
			awk -v n="$n" -v i="$i" '(NR - 1) % n == i' "$work/order" >"$work/shard$i"
			"$work/epoch-reader" -dir "${mnts[$i]}" -manifest "$work/shard$i" -epochs 1 -readers "$readers" -seed $((e * 10 + i)) >"$work/er$n.$i.$e" 2>&1 &
			pids+=($!)
		done
		for p in "${pids[@]}"; do
			if ! wait "$p"; then
				echo "epoch-reader failed:" >&2
				cat "$work"/er$n.*."$e" >&2
				exit 1
			fi
		done
		secs=$(echo "$(date +%s.%N) - $start" | bc -l)
		b=$(($(sum backend_bytes) - b0))
		p=$(($(sum peer_bytes) - p0))
		ideal=$((D - n * share))
		[ "$ideal" -lt 0 ] && ideal=0
		[ "$e" -eq 1 ] && ideal=$D
		readb=$D
		mbs=$(echo "$readb / $secs / 1000000" | bc -l)
		printf '%d\t%d\t%.3f\t%d\t%d\t%d\t%d\n' "$n" "$e" "$secs" "$b" "$ideal" "$p" "$readb" >>"$out"
		printf '%-7d %-6d %9.2f %14d %14d %14d %10.1f\n' "$n" "$e" "$secs" "$b" "$ideal" "$p" "$mbs"
	done
	for m in "${mnts[@]}"; do "$bin" unmount "$m"; done
	mnts=()
done
echo "raw rows: $out" >&2
