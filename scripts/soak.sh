#!/usr/bin/env bash
# make soak: 64 concurrent readers plus epoch-order prefetch for SOAK_MINUTES
# over a throttled local backend with a cache smaller than the dataset
# (issue 10, "Load"); RSS, goroutines and open file descriptors of the daemon
# must be flat at the end. Not part of make test.
#
# A generated ImageNet-like dataset (SOAK_FILES files, mean SOAK_MEAN, 100
# classes) is mounted with --backend-latency 5ms --backend-bandwidth
# 200MB/s, a memory tier of a third of the dataset, a disk tier of another
# third, and prefetch (--order torch-random --seed 7 --layout imagefolder).
# scripts/epoch-reader reads epoch after epoch with SOAK_READERS readers in
# its own seeded random order, checking every byte against the source, and
# one more reader reads each epoch in the order the prefetcher predicts
# (`stallfs order show`), so that the prefetcher runs ahead of it, until
# SOAK_MINUTES have passed. Every SOAK_INTERVAL seconds the script samples the daemon's
# RSS (/proc/PID/status VmRSS), goroutines (go_goroutines from
# --metrics-addr; OS threads from /proc/PID/status when the mount does not
# export it) and open file descriptors (/proc/PID/fd).
#
# Result: first, last and max of each series, and FAIL (exit 1) if a read
# failed or a byte differed, or if the mean of a series over the last third
# of the samples exceeds its mean over the middle third by more than the
# tolerance: 10% + 16 MiB for RSS, 10% + 32 for goroutines, 10% + 16 for
# file descriptors (the first third is the warm-up: caches filling).
#
# Knobs (environment): SOAK_MINUTES (10), SOAK_READERS (64), SOAK_FILES
# (3000), SOAK_MEAN (24KiB), SOAK_INTERVAL (10), SOAK_OUT
# (out/soak.tsv: the samples), STALLFS_BIN (bin/stallfs). Needs root
# (FUSE).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
. scripts/lib.sh

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
minutes=${SOAK_MINUTES:-10}
readers=${SOAK_READERS:-64}
files=${SOAK_FILES:-3000}
mean=${SOAK_MEAN:-24KiB}
interval=${SOAK_INTERVAL:-10}
out=$(bench_out "${SOAK_OUT:-out/soak.tsv}")

work=$(mktemp -d /tmp/stallfs-soak.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt" "$work/cache"
rpid= opid=
cleanup() {
	stop_pid "$rpid"
	stop_pid "$opid"
	unmount_stallfs "$bin" "$mnt"
	rm -rf "$work"
}
trap cleanup EXIT

reader=$(build_reader "$work")
go run ./scripts/gen-dataset -out "$work/src" -classes 100 -files "$files" -mean "$mean" \
	-min 4KiB -max 256KiB -seed 3 >/dev/null
D=$(du -sb "$work/src/train" | cut -f1)
third=$((D / 3))
port=$(free_port 19300)
"$bin" mount --daemon --log-file "$work/stallfs.log" --cache-mem "$third" --cache-dir "$work/cache" \
	--cache-disk "$third" --backend-latency 5ms --backend-bandwidth 200MB/s \
	--order torch-random --seed 7 --layout imagefolder --metrics-addr "127.0.0.1:$port" \
	"$work/src/train" "$mnt"
pid=$(grep -o 'pid=[0-9]*' "$work/stallfs.log" | head -1 | cut -d= -f2)
echo "soak: $files files, $D bytes; cache $third B memory + $third B disk; $readers readers + prefetch; $minutes min; daemon pid $pid"

# goroutines: go_goroutines if the mount exports it, else OS threads.
gsource=go_goroutines
if ! curl -fsS "http://127.0.0.1:$port/metrics" | grep '^go_goroutines ' >/dev/null; then
	gsource=threads
	echo "soak: the mount does not export go_goroutines; sampling OS threads instead"
fi
sample() {
	local rss g fds
	rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$pid/status")
	if [ "$gsource" = go_goroutines ]; then
		g=$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^go_goroutines / {print $2}')
	else
		g=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status")
	fi
	fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
	printf '%d\t%s\t%s\t%s\n' "$(($(date +%s) - start))" "$rss" "$g" "$fds" >>"$out"
}

printf 'seconds\trss_bytes\t%s\tfds\n' "$gsource" >"$out"
start=$(date +%s)
deadline=$((start + minutes * 60))
(
	epoch=0
	while [ "$(date +%s)" -lt "$deadline" ]; do
		epoch=$((epoch + 1))
		"$reader" -dir "$mnt" -epochs 1 -readers "$readers" -seed "$epoch" -verify-dir "$work/src/train" \
			-format tsv -label soak >>"$work/epochs.tsv"
	done
) &
rpid=$!
# One more reader follows the prefetcher's order (`stallfs order show`), as
# a DataLoader does, so that the prefetcher runs ahead of it epoch after
# epoch; its bytes are checked against the source's in the same order.
(
	epoch=0
	while [ "$(date +%s)" -lt "$deadline" ]; do
		"$bin" order show --epoch "$epoch" "$mnt" >"$work/order.txt"
		got=$(cd "$mnt" && xargs -a "$work/order.txt" -d '\n' -n 64 cat | cksum)
		want=$(cd "$work/src/train" && xargs -a "$work/order.txt" -d '\n' -n 64 cat | cksum)
		if [ "$got" != "$want" ]; then
			echo "soak: ordered reader: epoch $epoch differs from the source" >&2
			exit 1
		fi
		echo "$epoch" >>"$work/ordered.txt"
		epoch=$((epoch + 1))
	done
) &
opid=$!
sample
while kill -0 "$rpid" 2>/dev/null || kill -0 "$opid" 2>/dev/null; do
	sleep "$interval"
	kill -0 "$pid" || { echo "soak: FAIL: the daemon died" >&2; exit 1; }
	sample
done
status=0
wait "$rpid" || status=$?
wait "$opid" || status=$?
rpid= opid=
epochs=$(wc -l <"$work/epochs.tsv")
ordered=$(wc -l <"$work/ordered.txt" 2>/dev/null || echo 0)
echo "soak: $epochs epochs of $readers random readers and $ordered epochs of the reader in the prefetch order; every byte verified: $([ "$status" = 0 ] && echo yes || echo NO)"
"$bin" stats "$mnt" | head -20 || true

# first/last/max and the growth check, per series.
awk -F'\t' -v status="$status" '
NR == 1 { for (i = 2; i <= 4; i++) name[i] = $i; next }
{ n++; for (i = 2; i <= 4; i++) v[n, i] = $i }
END {
	tolp[2] = 0.10; tola[2] = 16 * 1048576
	tolp[3] = 0.10; tola[3] = 32
	tolp[4] = 0.10; tola[4] = 16
	fail = (status != 0)
	if (n < 6) { printf "soak: only %d samples; too few to judge growth (run longer)\n", n; exit 1 }
	a = int(n / 3); b = int(2 * n / 3)
	for (i = 2; i <= 4; i++) {
		mx = 0; for (k = 1; k <= n; k++) if (v[k, i] > mx) mx = v[k, i]
		m2 = 0; for (k = a + 1; k <= b; k++) m2 += v[k, i]; m2 /= (b - a)
		m3 = 0; for (k = b + 1; k <= n; k++) m3 += v[k, i]; m3 /= (n - b)
		limit = m2 * (1 + tolp[i]) + tola[i]
		ok = (m3 <= limit)
		if (!ok) fail = 1
		printf "%-14s first %12.0f  last %12.0f  max %12.0f  mean middle third %12.0f  last third %12.0f  limit %12.0f  %s\n",
			name[i], v[1, i], v[n, i], mx, m2, m3, limit, ok ? "flat" : "GROWS"
	}
	printf "soak: %d samples; %s\n", n, fail ? "FAIL" : "PASS"
	exit fail
}' "$out"
