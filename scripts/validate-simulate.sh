#!/usr/bin/env bash
# scripts/validate-simulate.sh: `stallfs simulate` against real mounts
# (issue 10: the cluster what-if within 5% of the measured 1-3 mount runs).
#
# One generated dataset of D bytes (~110 KB files) on local disk is the
# source of 1, 2 or 3 stallfs mounts on 127.0.0.1, each with a memory cache
# and a throttled backend (--backend-bandwidth, --backend-latency; the
# throttle is per mount, so the model's aggregate backend rate is M times
# it). Each epoch is a fresh permutation (awk's rand seeded by the epoch):
# one mount reads all of it; several mounts are dealt it DistributedSampler
# style (line i of the permutation to mount i mod M). scripts/epoch-reader
# reads (every byte verified against the manifest's sha256), all mounts at
# once. Before and after each epoch the script reads every mount's
# `stallfs stats --json` and prints, per epoch, the cluster's backend
# bytes (bytes_by_source.backend, or in a peer group the sum of
# peers.fills.backend_bytes) and the fetch stall per node (the mean of the
# mounts' stall_wall_seconds deltas) beside `stallfs simulate --json` for
# the same inputs, and how far apart they are.
#
# Cases (name nodes cache/D distributed latency bandwidth-per-mount system):
#   alone-bw     1 1/2 no  0     VALIDATE_BANDWIDTH  minio        bandwidth-bound
#   alone-lat    1 1/2 no  20ms  1GB/s               minio        latency-bound
#   dist2        2 1/4 yes 0     VALIDATE_BANDWIDTH  minio        two mounts, no peers
#   peers2       2 1/4 yes 0     VALIDATE_BANDWIDTH  minio_peers
#   peers3       3 1/5 yes 0     VALIDATE_BANDWIDTH  minio_peers
#
# Knobs (environment): VALIDATE_BYTES (64MiB), VALIDATE_EPOCHS (3),
# VALIDATE_READERS (8 per mount), VALIDATE_BANDWIDTH (5MB/s per mount: the
# throttle lets 10 ms of credit through after an idle moment, so its rate
# is exact only while 10 ms of it is well under an item),
# VALIDATE_CASES (all five), VALIDATE_DATA (reuse a dataset directory),
# VALIDATE_OUT (raw rows, out/validate-simulate.tsv), STALLFS_BIN
# (bin/stallfs, built if missing), VALIDATE_PORT (first port tried, 17370;
# busy ports are skipped).
# Needs FUSE (root), jq and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin=${STALLFS_BIN:-bin/stallfs}
[ -x "$bin" ] || go build -o "$bin" ./cmd/stallfs
bin=$(realpath "$bin")
bytes=${VALIDATE_BYTES:-64MiB}
epochs=${VALIDATE_EPOCHS:-3}
readers=${VALIDATE_READERS:-8}
bandwidth=${VALIDATE_BANDWIDTH:-5MB/s}
cases=${VALIDATE_CASES:-alone-bw alone-lat dist2 peers2 peers3}
port0=${VALIDATE_PORT:-17370}
out=$(bench_out "${VALIDATE_OUT:-out/validate-simulate.tsv}")
for tool in jq curl; do
	command -v "$tool" >/dev/null || { echo "validate-simulate: needs $tool" >&2; exit 1; }
done

work=$(mktemp -d /tmp/validate-simulate.XXXXXX)
mnts=()
cleanup() {
	local m
	for m in "${mnts[@]}"; do unmount_stallfs "$bin" "$m"; done
	rm -rf "$work"
}
trap cleanup EXIT

data=${VALIDATE_DATA:-$work/data}
if [ ! -d "$data/train" ]; then
	go run ./scripts/gen-dataset -out "$data" -bytes "$bytes" -classes 20 -seed 11 -manifest "$data/manifest.tsv" >&2
fi
sed 's|^train/||' "$data/manifest.tsv" >"$work/manifest"
go build -o "$work/epoch-reader" ./scripts/epoch-reader
D=$(awk -F'\t' '{s += $2} END {print s}' "$work/manifest")
N=$(wc -l <"$work/manifest")
rate_bytes() { # RATE -> bytes/s, as stallfs parses it (go-humanize)
	"$bin" simulate --dataset 1 --files 1 --cache 0 --backend-bandwidth "$1" --epochs 1 --json | jq -r '.inputs.backend_rate'
}
printf 'secret-%s\n' "$RANDOM$RANDOM" >"$work/secret"
chmod 600 "$work/secret"

# sock MNT: the mount's control socket.
sock() { getfattr --only-values -n user.stallfs.control "$1" 2>/dev/null ||
	python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], "user.stallfs.control").decode())' "$1"; }
# measure: "backend stall" summed over the mounts (stallfs stats --json).
measure() {
	local m b=0 s=0 doc
	for m in "${mnts[@]}"; do
		doc=$("$bin" stats --json --files 0 "$m")
		b=$((b + $(jq -r 'if .peers then .peers.fills.backend_bytes else .totals.bytes_by_source.backend end' <<<"$doc")))
		s=$(jq -rn --argjson a "$s" --argjson d "$doc" '$a + $d.totals.stall_wall_seconds')
	done
	echo "$b $s"
}

echo "dataset: $N files, $D bytes; $readers readers per mount; $epochs epochs; commit $(git rev-parse --short HEAD)" >&2
printf 'case\tnodes\tepoch\tbackend_bytes\tmodel_backend_bytes\tbackend_diff_pct\tstall_s\tmodel_stall_s\tstall_diff_pct\treader_epoch_s\tmodel_epoch_s\n' >"$out"
printf '%-10s %-6s %13s %13s %8s %9s %9s %8s %9s %9s\n' case epoch backend_B model_B diff stall_s model_s diff epoch_s model_s
for c in $cases; do
	latency=0s bw=$bandwidth dist="" group=""
	case $c in
	alone-bw) n=1 div=2 system=minio ;;
	alone-lat) n=1 div=2 system=minio latency=20ms bw=1GB/s ;;
	dist2) n=2 div=4 system=minio dist=--distributed ;;
	peers2) n=2 div=4 system=minio_peers dist=--distributed group=1 ;;
	peers3) n=3 div=5 system=minio_peers dist=--distributed group=1 ;;
	*) echo "validate-simulate: unknown case $c" >&2; exit 1 ;;
	esac
	cache=$((D / div))
	agg=$(($(rate_bytes "$bw") * n))
	model=$("$bin" simulate --json --dataset "$D" --files "$N" --cache "$cache" --nodes "$n" \
		--backend-bandwidth "$agg" --backend-latency "$latency" --concurrency "$readers" --epochs "$epochs" $dist)
	list="" ports=() p=$port0
	for i in $(seq 0 $((n - 1))); do
		p=$(free_port "$p")
		ports+=("$p")
		list="$list${list:+,}127.0.0.1:$p"
		p=$((p + 1))
	done
	mnts=()
	for i in $(seq 0 $((n - 1))); do
		m="$work/mnt-$c.$i"
		mkdir -p "$m"
		peer=()
		[ -n "$group" ] && peer=(--peers "$list" --peer-listen "127.0.0.1:${ports[$i]}" --peer-secret-file "$work/secret")
		"$bin" mount --daemon --cache-mem "$cache" --cache-disk 0 --cache-dir "$work/cache-$c.$i" \
			--backend-bandwidth "$bw" --backend-latency "$latency" "${peer[@]}" \
			"$data/train" "$m" >"$work/log-$c.$i" 2>&1 || { cat "$work/log-$c.$i" >&2; exit 1; }
		mnts+=("$m")
	done
	if [ -n "$group" ]; then # every member sees every other up
		for m in "${mnts[@]}"; do
			for _ in $(seq 400); do
				[ "$(curl -s --unix-socket "$(sock "$m")" http://stallfs/v1/peers | jq -r .live)" = "$n" ] && break
				sleep 0.05
			done
		done
	fi
	read -r b0 s0 <<<"$(measure)"
	for e in $(seq 1 "$epochs"); do
		# A fresh permutation per epoch.
		shuffle_seeded "$((e * 7919))" "$work/manifest" >"$work/order"
		pids=()
		for i in "${!mnts[@]}"; do
			awk -v n="$n" -v i="$i" '(NR - 1) % n == i' "$work/order" >"$work/shard$i"
			"$work/epoch-reader" -dir "${mnts[$i]}" -manifest "$work/shard$i" -epochs 1 -readers "$readers" \
				-seed $((e * 10 + i)) -format tsv >"$work/er-$c.$i.$e" 2>&1 &
			pids+=($!)
		done
		for p in "${pids[@]}"; do
			wait "$p" || { echo "epoch-reader failed:" >&2; cat "$work"/er-"$c".*."$e" >&2; exit 1; }
		done
		# The slowest mount's epoch, as its reader timed it.
		secs=$(cat "$work"/er-"$c".*."$e" | awk -F'\t' '$6 > m {m = $6} END {print m + 0}')
		read -r b1 s1 <<<"$(measure)"
		mb=$(jq -r --arg s "$system" --argjson e "$e" '.systems[] | select(.system == $s) | .epochs[$e - 1].backend_bytes_total' <<<"$model")
		ms=$(jq -r --arg s "$system" --argjson e "$e" '.systems[] | select(.system == $s) | .epochs[$e - 1].stall_seconds' <<<"$model")
		mt=$(jq -r --arg s "$system" --argjson e "$e" '.systems[] | select(.system == $s) | .epochs[$e - 1].epoch_seconds' <<<"$model")
		row=$(jq -rn --arg c "$c" --argjson n "$n" --argjson e "$e" --argjson b "$((b1 - b0))" --argjson mb "$mb" \
			--argjson s "$(echo "($s1 - $s0) / $n" | bc -l | sed 's/^\./0./')" --argjson ms "$ms" --argjson t "$secs" --argjson mt "$mt" '
			def pct(a; m): if m == 0 then (if a == 0 then 0 else 100 end) else 100 * (a - m) / m end;
			[$c, $n, $e, $b, $mb, (pct($b; $mb) * 100 | round / 100), ($s * 1000 | round / 1000),
			 ($ms * 1000 | round / 1000), (pct($s; $ms) * 10 | round / 10), $t, ($mt * 1000 | round / 1000)] | @tsv')
		echo "$row" >>"$out"
		awk -F'\t' '{printf "%-10s %-6s %13d %13d %7.2f%% %9.3f %9.3f %7.1f%% %9.3f %9.3f\n", $1, $3, $4, $5, $6, $7, $8, $9, $10, $11}' <<<"$row"
		b0=$b1 s0=$s1
	done
	for m in "${mnts[@]}"; do "$bin" unmount "$m"; done
	mnts=()
done
echo "raw rows: $out" >&2
