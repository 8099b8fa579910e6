#!/usr/bin/env bash
# make bench-prefetch: fetch stall per epoch with epoch-order prefetch
# against without (issue 7).
#
# A generated ImageFolder of real JPEGs is mounted with a throttled backend
# (--backend-latency 20ms --backend-bandwidth 100MB/s) and a memory cache of
# f x D for f = 0.25 and 0.5. scripts/train_loader.py (PyTorch DataLoader,
# DistributedSampler(num_replicas=1, rank=0, seed=SEED), set_epoch each
# epoch, a simulated GPU step of BENCH_GPU_MS per batch: a consumer slower
# than what the backend can deliver for the misses) runs BENCH_EPOCHS epochs
# over it, once on a mount without prefetch and once on a mount with
# --order torch-distributed --seed SEED --layout imagefolder (the seed
# exported; the loop unchanged). Per epoch it records stallfs's fetch stall
# (stats epoch rows: fetch_stall_seconds summed over reads, and
# stall_wall_seconds, wall time with some read waiting on the backend), the
# backend bytes the reads took, and the loop's own data stall (time waiting
# for the next batch, which includes JPEG decode on the workers).
#
# Knobs (environment): BENCH_FILES (400), BENCH_MEAN (32KiB), BENCH_EPOCHS
# (3), BENCH_FRACTIONS ("0.25 0.5"), BENCH_GPU_MS (100), BENCH_BATCH (16),
# BENCH_WORKERS (2), BENCH_CROP (224), BENCH_SEED (11), BENCH_OUT
# (out/bench-prefetch.tsv), STALLFS_BIN (bin/stallfs). Needs root (FUSE)
# and Debian's python3-torch and python3-torchvision (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
files=${BENCH_FILES:-400}
mean=${BENCH_MEAN:-32KiB}
epochs=${BENCH_EPOCHS:-3}
fractions=${BENCH_FRACTIONS:-0.25 0.5}
gpu_ms=${BENCH_GPU_MS:-100}
batch=${BENCH_BATCH:-16}
workers=${BENCH_WORKERS:-2}
crop=${BENCH_CROP:-224}
seed=${BENCH_SEED:-11}
out=${BENCH_OUT:-out/bench-prefetch.tsv}
py=/usr/bin/python3
mkdir -p "$(dirname "$out")"
out=$(realpath "$out")

if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch python3-torchvision
fi

work=$(mktemp -d /tmp/stallfs-bench-prefetch.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
	if mountpoint -q "$mnt"; then "$bin" unmount "$mnt" >/dev/null 2>&1 || fusermount3 -uz "$mnt" || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

go run ./scripts/gen-dataset -out "$work/src" -jpeg -classes 10 -files "$files" -mean "$mean" \
	-min 8KiB -max 256KiB -seed 5 -manifest "$work/manifest.tsv" >/dev/null
D=$(awk -F'\t' '{s += $2} END {print s}' "$work/manifest.tsv")
echo "dataset: $files JPEGs, $D bytes; backend 20ms + 100MB/s; $epochs epochs; gpu ${gpu_ms}ms/batch of $batch; $workers workers"

printf 'f\tprefetch\tepoch\tseconds\tfetch_stall_s\tstall_wall_s\tbackend_bytes\tmemory_bytes\tloader_stall_s\timages_per_s\n' >"$out"
for f in $fractions; do
	cache=$(awk -v d="$D" -v f="$f" 'BEGIN {printf "%d", d * f}')
	for pf in off on; do
		order=()
		[ "$pf" = on ] && order=(--order torch-distributed --seed "$seed" --world-size 1 --rank 0 --layout imagefolder)
		"$bin" mount --daemon --log-file "$work/log" --cache-mem "$cache" --backend-latency 20ms \
			--backend-bandwidth 100MB/s "${order[@]}" "$work/src/train" "$mnt"
		"$py" scripts/train_loader.py "$mnt" --manifest "$work/manifest.tsv" --epochs "$epochs" \
			--workers "$workers" --batch-size "$batch" --crop "$crop" --gpu-ms "$gpu_ms" \
			--sampler distributed --seed "$seed" --json >"$work/loader.jsonl"
		"$bin" stats --json "$mnt" >"$work/stats.json"
		"$bin" unmount "$mnt"
		"$py" - "$f" "$pf" "$work/stats.json" "$work/loader.jsonl" >>"$out" <<'EOF'
import json, sys
f, pf, stats, loader = sys.argv[1:]
rows = json.load(open(stats))["epochs"]
lines = [json.loads(l) for l in open(loader) if l.strip()]
for i, r in enumerate(rows):
    l = lines[i] if i < len(lines) else {}
    print("\t".join(str(x) for x in [f, pf, r["epoch"], round(r["seconds"], 2),
        round(r["fetch_stall_seconds"], 3), round(r["stall_wall_seconds"], 3),
        r["bytes_by_source"]["backend"], r["bytes_by_source"]["memory"],
        l.get("stall_seconds", ""), l.get("images_per_s", "")]))
EOF
	done
done
column -t "$out"
# The ratio the target is about: fetch stall with prefetch / without, per
# f, over the epochs after the first (the first is cold for both).
awk -F'\t' 'NR > 1 && $3 > 1 { s[$1, $2] += $5; w[$1, $2] += $6; f[$1] = 1 }
	END { for (x in f) {
		r = (s[x, "off"] > 0) ? 100 * s[x, "on"] / s[x, "off"] : 0
		printf "f=%s epochs 2..: fetch stall %.3fs without prefetch, %.3fs with (%.2f%%); wall time with a read waiting %.3fs vs %.3fs\n", x, s[x, "off"], s[x, "on"], r, w[x, "off"], w[x, "on"] } }' "$out"
