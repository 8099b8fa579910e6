#!/usr/bin/env bash
# make demo: generate a ~1 GiB ImageNet-like dataset in a temporary
# directory, mount it with `stallfs mount --daemon`, read it for 3 epochs in
# random order with several concurrent readers (every byte verified against
# the generator's manifest), and unmount. Everything is removed on exit.
#
# Knobs (environment): DEMO_BYTES (1GiB), DEMO_EPOCHS (3), DEMO_READERS (8),
# DEMO_SEED (1), STALLFS_BIN (bin/stallfs), DEMO_KEEP=1 keeps the work dir.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
bytes=${DEMO_BYTES:-1GiB}
epochs=${DEMO_EPOCHS:-3}
readers=${DEMO_READERS:-8}
seed=${DEMO_SEED:-1}

work=$(mktemp -d /tmp/stallfs-demo.XXXXXX)
data=$work/data
mnt=$work/mnt
mkdir -p "$mnt"

cleanup() {
	local rc=$?
	if grep -qs " $mnt " /proc/self/mountinfo; then
		"$bin" unmount "$mnt" 2>/dev/null || "$bin" unmount --lazy "$mnt" || true
	fi
	if [ "$rc" -ne 0 ] && [ -s "$work/stallfs.log" ]; then
		echo "--- stallfs log (last 20 lines) ---" >&2
		tail -n 20 "$work/stallfs.log" >&2
	fi
	if [ "${DEMO_KEEP:-0}" = 1 ]; then
		echo "kept $work"
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n== %s\n' "$*"; }

go build -o "$work/epoch-reader" ./scripts/epoch-reader

step "generating a ~$bytes ImageNet-like dataset (seed $seed) in $data"
go run ./scripts/gen-dataset -out "$data" -bytes "$bytes" -seed "$seed" -manifest "$work/manifest.tsv"

step "stallfs mount --daemon $data $mnt"
"$bin" mount --daemon --log-file "$work/stallfs.log" "$data" "$mnt"
grep " $mnt " /proc/self/mountinfo | awk '{print "mounted:", $5, "type", $(NF-2), "source", $(NF-1)}'
echo "top level: $(ls "$mnt" | tr '\n' ' ')"
echo "classes:   $(ls "$mnt/train" | wc -l) ($(ls "$mnt/train" | head -n 3 | tr '\n' ' ')...)"

step "reading $epochs epochs in random order with $readers readers through the mount"
"$work/epoch-reader" -dir "$mnt" -epochs "$epochs" -readers "$readers" -seed "$seed" -manifest "$work/manifest.tsv"

# ---- STATS: the run's stall accounting (fetch stall per epoch, bytes by
# source, hit rate against the MinIO optimum, top files, what-if).
step "stallfs stats --files 5 $mnt"
"$bin" stats --files 5 "$mnt"
# ---- end STATS

step "stallfs unmount $mnt"
"$bin" unmount "$mnt"
echo "unmounted; removing $work"
