#!/usr/bin/env bash
# make bench-e2e: a real PyTorch input loop (scripts/train_loader.py:
# ImageFolder, JPEG decode, RandomResizedCrop/flip/ToTensor/Normalize,
# DataLoader workers, DistributedSampler(num_replicas=1, rank=0, seed=SEED)
# with set_epoch, a simulated GPU step of BENCH_GPU_MS per batch) over the
# same generated JPEG dataset of D bytes, the same memory budget f x D and
# the same per-epoch orders, on every system (issue 9):
#
#   synthetic         --synthetic: no I/O, no decode (DS-Analyzer's maximum
#                     ingestion rate of the simulated GPU)
#   cached            local disk, every file in the page cache beforehand,
#                     no memory limit (DS-Analyzer's fully cached run: its
#                     data stall is the prep stall); it also measures the
#                     peak memory of the read helpers (below), the cgroup
#                     allowance of the pagecache runs
#   pagecache         local disk, the dataset's pages evicted, the samples
#                     read by the loop's read helpers (train_loader.py
#                     --read-cgroup: one small process per DataLoader
#                     worker that does the read() calls) inside a memory
#                     cgroup of f x D + the helpers' peak + 256 KiB
#                     (DS-Analyzer's cold run with the budget: the page
#                     cache, LRU). The kernel charges a page to the cgroup
#                     of the process that reads it in, so the cgroup holds
#                     the page cache of the dataset and the helpers' few
#                     constant MB, not the loop's own memory, whose
#                     variation (tens of MB between batches) went to the
#                     page cache when the whole loop ran in the cgroup.
#                     Device bytes per epoch from /proc/PID/io read_bytes
#                     of the loop (workers and helpers are reaped, so it
#                     counts theirs); page_cache_bytes is the cgroup's
#                     page cache after each epoch.
#   rclone            rclone mount of the local directory, --vfs-cache-mode
#                     full --vfs-cache-max-size f x D (poll interval 1s so
#                     the limit holds within an epoch), --bwlimit 100 MB/s;
#                     bytes per epoch from rclone's rc core/stats
#   stallfs           stallfs mount --cache-mem f x D over the throttled
#                     local backend (--backend-latency 20ms
#                     --backend-bandwidth 100MB/s); bytes per epoch from the
#                     throttle's own counter (stallfs_throttle_read_bytes_total
#                     on --metrics-addr: reads and prefetches alike)
#   stallfs-prefetch  the same + --order torch-distributed --seed SEED
#                     --world-size 1 --rank 0 --layout imagefolder (the
#                     exported seed; the loop unchanged)
#   rclone-s3, stallfs-s3, stallfs-prefetch-s3
#                     the same mounts of an S3 bucket holding the dataset
#                     (versitygw, posix backend, 127.0.0.1) reached through
#                     scripts/latency-proxy, which adds 20ms to every
#                     request and paces all response bodies together to
#                     100 MB/s: the same emulated storage for both, with
#                     no client-side limit; bytes per epoch are the object
#                     GET bodies the proxy counted.
#
# Storage: the local systems read the same local disk; there only stallfs's
# backend is throttled (20ms per request + 100 MB/s), rclone's is
# bandwidth-limited only, and the page cache reads the raw disk (it cannot
# be anything else: it is the kernel's cache of a local file system). The
# -s3 systems share one emulated store, so their times compare fairly.
# Every sample's bytes are verified against the generator's manifest.
#
# Output (BENCH_OUT_DIR, docs/e2e): e2e.csv, e2e.md, and the PNGs of
# scripts/plot_e2e.py. Knobs (environment): BENCH_FILES (600), BENCH_MEAN
# (48KiB), BENCH_EPOCHS (4), BENCH_FRACTIONS ("0.25 0.5 0.75"),
# BENCH_SYSTEMS ("pagecache rclone stallfs stallfs-prefetch rclone-s3
# stallfs-s3 stallfs-prefetch-s3"), BENCH_GPU_MS (60), BENCH_BATCH (16),
# BENCH_WORKERS (2), BENCH_CROP (224), BENCH_SEED (11), BENCH_RC_PORT
# (25731), BENCH_METRICS_PORT (the next), STALLFS_BIN (bin/stallfs),
# STALLFS_VERSITYGW (.cache/bin/versitygw, built when missing). Needs root
# (FUSE, cgroups), python3-torch, python3-torchvision, python3-matplotlib
# and rclone (installed with apt-get if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
export PATH=/usr/local/go/bin:$PATH

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
files=${BENCH_FILES:-600}
mean=${BENCH_MEAN:-48KiB}
epochs=${BENCH_EPOCHS:-4}
fractions=${BENCH_FRACTIONS:-0.25 0.5 0.75}
systems=${BENCH_SYSTEMS:-pagecache rclone stallfs stallfs-prefetch rclone-s3 stallfs-s3 stallfs-prefetch-s3}
gpu_ms=${BENCH_GPU_MS:-60}
batch=${BENCH_BATCH:-16}
workers=${BENCH_WORKERS:-2}
crop=${BENCH_CROP:-224}
seed=${BENCH_SEED:-11}
# Listening ports below the ephemeral range (32768-60999 on Linux), where an
# outgoing connection could hold them; free_port skips listeners.
rcport=$(free_port "${BENCH_RC_PORT:-25731}")
mport=$(free_port "${BENCH_METRICS_PORT:-$((rcport + 1))}")
outdir=${BENCH_OUT_DIR:-docs/e2e}
py=/usr/bin/python3
mkdir -p "$outdir"
outdir=$(realpath "$outdir")

[ "$(id -u)" = 0 ] || { echo "bench-e2e: needs root (FUSE, cgroups, drop_caches)" >&2; exit 1; }

missing=""
"$py" -c 'import torch, torchvision' 2>/dev/null || missing="$missing python3-torch python3-torchvision"
"$py" -c 'import matplotlib' 2>/dev/null || missing="$missing python3-matplotlib"
command -v rclone >/dev/null || missing="$missing rclone"
if [ -n "$missing" ]; then
	echo "installing:$missing"
	apt-get update -qq
	# shellcheck disable=SC2086 # a list of packages
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
fi

# The memory controller (cgroup v2 or v1): scripts/lib.sh.
mem_cgroup stallfs-bench-e2e

work=$(mktemp -d /tmp/stallfs-bench-e2e.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
rclone_pid="" vgw_pid="" proxy_pid=""
cleanup() {
	local rc=$?
	if grep -qs " $mnt " /proc/self/mountinfo; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" || true
	fi
	if [ -n "$rclone_pid" ]; then kill "$rclone_pid" 2>/dev/null || true; fi
	stop_pid "$proxy_pid"
	stop_pid "$vgw_pid"
	if [ -d "$cg" ]; then
		while read -r pid; do echo "$pid" >"$cgroot/cgroup.procs" || true; done <"$cg/cgroup.procs"
		rmdir "$cg" || true
	fi
	cp "$work/rclone.log" /tmp/e2e-rclone.log 2>/dev/null || true
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go run ./scripts/gen-dataset -out "$work/src" -jpeg -classes 10 -files "$files" -mean "$mean" \
	-min 8KiB -max 256KiB -seed 5 -manifest "$work/manifest.tsv" >/dev/null
data=$work/src/train
D=$(awk -F'\t' '{s += $2} END {printf "%d", s}' "$work/manifest.tsv")
echo "dataset: $files JPEGs, $D bytes; $epochs epochs; f = $fractions; gpu ${gpu_ms}ms per batch of $batch; $workers workers; crop $crop"

# The emulated object store of the -s3 systems: versitygw with the dataset
# at the root of bucket "bench", behind scripts/latency-proxy.
case " $systems " in
*-s3\ *)
	vgw=$(versitygw_bin)
	access=stallfs-bench-access
	secret=stallfs-bench-secret-0123456789
	mkdir -p "$work/gw" "$work/meta"
	vport=$(free_port 27270)
	ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
		"$vgw" --port "127.0.0.1:$vport" --keep-alive --quiet posix --sidecar "$work/meta" "$work/gw" \
		>"$work/versitygw.log" 2>&1 &
	vgw_pid=$!
	wait_port "$vport" "$vgw_pid" "$work/versitygw.log" 200
	go build -o "$work/latency-proxy" ./scripts/latency-proxy
	pport=$(free_port $((vport + 1)))
	sport=$(free_port $((pport + 1)))
	"$work/latency-proxy" -listen "127.0.0.1:$pport" -stats-listen "127.0.0.1:$sport" \
		-target "http://127.0.0.1:$vport" -latency 20ms -bandwidth 100MB >"$work/proxy.log" 2>&1 &
	proxy_pid=$!
	wait_port "$sport" "$proxy_pid" "$work/proxy.log" 200
	export RCLONE_CONFIG=$work/rclone.conf
	for r in "vgw $vport" "vgwp $pport"; do
		set -- $r
		printf '[%s]\ntype = s3\nprovider = Other\naccess_key_id = %s\nsecret_access_key = %s\nendpoint = http://127.0.0.1:%s\nregion = us-east-1\nforce_path_style = true\n\n' \
			"$1" "$access" "$secret" "$2" >>"$RCLONE_CONFIG"
	done
	echo "uploading the dataset to versitygw (127.0.0.1:$vport); the mounts go through latency-proxy 127.0.0.1:$pport (20ms, 100 MB/s)"
	env -u AWS_CA_BUNDLE rclone mkdir vgw:bench
	env -u AWS_CA_BUNDLE rclone copy --transfers 8 --checkers 8 "$data" vgw:bench
	;;
esac
# proxy_bytes: the object GET body bytes the proxy passed so far.
proxy_bytes() { curl -sf "http://127.0.0.1:$sport/" | awk '$1 == "get_bytes" {print $2}'; }

# loop NAME ROOT HOOK [ARG...]: runs the loader over ROOT, HOOK after
# every epoch (it appends one cumulative counter to $work/NAME.bytes;
# $work/NAME.base, when there, holds the counter's value before the run);
# ARGs go to the loader.
loop() {
	local name=$1 root=$2 hook=$3
	shift 3
	: >"$work/$name.bytes"
	"$py" scripts/train_loader.py "$root" --manifest "$work/manifest.tsv" --epochs "$epochs" \
		--workers "$workers" --batch-size "$batch" --crop "$crop" --gpu-ms "$gpu_ms" \
		--sampler distributed --seed "$seed" --json --epoch-hook "$hook" "$@" >"$work/$name.jsonl"
}

# The loader's own device reads so far (its reaped workers and their read
# helpers included): the hook's parent is the loader.
pid_hook='awk '"'"'$1 == "read_bytes:" {print $2}'"'"' /proc/$PPID/io >>'

# evict DIR: drops DIR's files from the page cache (POSIX_FADV_DONTNEED).
evict() {
	"$py" - "$1" <<'PY'
import os, sys
for d, _, names in os.walk(sys.argv[1]):
    for n in names:
        fd = os.open(os.path.join(d, n), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
}

# 1. DS-Analyzer: synthetic, then fully cached (page cache warm, no limit).
echo "synthetic"
"$py" scripts/train_loader.py --synthetic --synthetic-images "$files" --epochs "$epochs" \
	--batch-size "$batch" --crop "$crop" --gpu-ms "$gpu_ms" --json >"$work/synthetic.jsonl"
: >"$work/synthetic.bytes"
echo "cached"
find "$data" -type f -exec cat {} + >/dev/null
mkdir "$cg"
loop cached "$data" "$pid_hook $work/cached.bytes" --read-cgroup "$cg"
peak=$(cat "$cg/$cgpeak")
allowance=$((peak + (256 << 10)))
rmdir "$cg"
echo "  the read helpers' peak memory (no data charged): $peak bytes; cgroup allowance $allowance"

for f in $fractions; do
	budget=$(awk -v f="$f" -v d="$D" 'BEGIN {printf "%d", f * d}')
	for s in $systems; do
		name="$s-$f"
		echo "$name (budget $budget bytes)"
		case $s in
		pagecache)
			mkdir "$cg"
			echo $((budget + allowance)) >"$cg/$cglimit"
			# Evict the dataset's pages only: dropping every cache would
			# charge the loop's libraries (libtorch) to the cgroup too.
			sync
			evict "$data"
			loop "$name" "$data" "$pid_hook $work/$name.bytes; awk '\$1 == \"$cgfile\" {print \$2}' $cg/memory.stat >>$work/$name.cache" \
				--read-cgroup "$cg"
			rmdir "$cg"
			;;
		rclone | rclone-s3)
			rm -rf "$work/rclone-cache"
			if [ "$s" = rclone ]; then
				src=$data limit=(--bwlimit 97656K) hook="rclone rc --url http://127.0.0.1:$rcport/ core/stats | jq .bytes >>$work/$name.bytes"
			else
				src=vgwp:bench limit=() hook="curl -sf http://127.0.0.1:$sport/ | awk '\$1 == \"get_bytes\" {print \$2}' >>$work/$name.bytes"
				proxy_bytes >"$work/$name.base"
			fi
			env -u AWS_CA_BUNDLE rclone mount "$src" "$mnt" --read-only --vfs-cache-mode full --vfs-cache-max-size "${budget}B" \
				--vfs-cache-poll-interval 1s --cache-dir "$work/rclone-cache" --dir-cache-time 1h \
				"${limit[@]}" --rc --rc-addr "127.0.0.1:$rcport" --rc-no-auth \
				--log-file "$work/rclone.log" -v &
			rclone_pid=$!
			wait_mounted "$mnt"
			loop "$name" "$mnt" "$hook"
			fusermount3 -u "$mnt"
			wait "$rclone_pid" || true
			rclone_pid=""
			;;
		stallfs | stallfs-prefetch | stallfs-s3 | stallfs-prefetch-s3)
			order=()
			case $s in stallfs-prefetch*) order=(--order torch-distributed --seed "$seed" --world-size 1 --rank 0 --layout imagefolder) ;; esac
			if [ "${s%-s3}" = "$s" ]; then
				"$bin" mount --daemon --log-file "$work/stallfs.log" --cache-mem "$budget" --backend-latency 20ms \
					--backend-bandwidth 100MB/s --metrics-addr "127.0.0.1:$mport" "${order[@]}" "$data" "$mnt"
				hook="curl -sf http://127.0.0.1:$mport/metrics | awk '\$1 == \"stallfs_throttle_read_bytes_total\" {printf \"%d\\n\", \$2}' >>$work/$name.bytes"
			else
				proxy_bytes >"$work/$name.base"
				AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1 \
					AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
					"$bin" mount --daemon --log-file "$work/stallfs.log" --cache-mem "$budget" \
					--s3-endpoint "http://127.0.0.1:$pport" --s3-path-style "${order[@]}" s3://bench "$mnt"
				hook="curl -sf http://127.0.0.1:$sport/ | awk '\$1 == \"get_bytes\" {print \$2}' >>$work/$name.bytes"
			fi
			loop "$name" "$mnt" "$hook"
			"$bin" unmount "$mnt"
			;;
		*)
			echo "bench-e2e: unknown system $s" >&2
			exit 2
			;;
		esac
	done
done

# The table: one row per system, f and epoch.
"$py" - "$work" "$D" "$outdir" "$fractions" "$systems" <<'EOF'
import csv, json, os, sys
work, D, outdir, fractions, systems = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(), sys.argv[5].split()

def read(name):
    rows = [json.loads(l) for l in open(os.path.join(work, name + ".jsonl")) if l.strip()]
    cum = [int(x) for x in open(os.path.join(work, name + ".bytes")).read().split()]
    base_path = os.path.join(work, name + ".base")
    base = int(open(base_path).read().split()[0]) if os.path.exists(base_path) else 0
    cache_path = os.path.join(work, name + ".cache")
    cache = [int(x) for x in open(cache_path).read().split()] if os.path.exists(cache_path) else []
    return rows, cum, cache, base

runs = [("synthetic", "", "synthetic"), ("cached", "", "cached")]
runs += [(s, f, f"{s}-{f}") for f in fractions for s in systems]
prep = {}
out = []
for system, f, name in runs:
    rows, cum, cache, base = read(name)
    prev = base
    for i, r in enumerate(rows):
        e = i + 1
        b = ""
        if i < len(cum):
            b, prev = cum[i] - prev, cum[i]
        if system == "cached":
            prep[e] = r["stall_seconds"]
        ideal = ""
        if f:
            ideal = D if e == 1 else round((1 - float(f)) * D)
        fetch = ""
        if system not in ("synthetic", "cached") and e in prep:
            fetch = round(max(0.0, r["stall_seconds"] - prep[e]), 3)
        out.append({
            "system": system, "f": f, "epoch": e, "seconds": round(r["seconds"], 2),
            "images_per_s": round(r["images_per_s"], 1), "data_stall_s": round(r["stall_seconds"], 2),
            "fetch_stall_s": fetch, "backend_bytes": b, "minio_ideal_bytes": ideal,
            "page_cache_bytes": cache[i] if i < len(cache) else "", "verified": r["verified"],
        })
cols = list(out[0].keys())
with open(os.path.join(outdir, "e2e.csv"), "w", newline="") as fh:
    w = csv.DictWriter(fh, fieldnames=cols)
    w.writeheader()
    w.writerows(out)
with open(os.path.join(outdir, "e2e.md"), "w") as fh:
    fh.write("| " + " | ".join(cols) + " |\n")
    fh.write("|" + "---|" * len(cols) + "\n")
    for r in out:
        fh.write("| " + " | ".join(str(r[c]) for c in cols) + " |\n")
print(open(os.path.join(outdir, "e2e.md")).read())
EOF
"$py" scripts/plot_e2e.py "$outdir/e2e.csv" "$outdir"
echo "dataset D = $D bytes ($files JPEGs); machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
