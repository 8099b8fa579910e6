#!/usr/bin/env bash
# make bench-s3: the epoch benchmark over a real S3 server. A generated
# ImageNet-like dataset is uploaded to versitygw (posix backend on local
# disk, 127.0.0.1), then read epoch after epoch, in a seeded random order
# with N concurrent readers (scripts/epoch-reader), through
#   - stallfs mount s3://bench (--s3-endpoint, --s3-path-style),
#   - rclone mount (Debian rclone) without a cache (--vfs-cache-mode off)
#     and with its disk cache (--vfs-cache-mode full, --vfs-cache-max-size
#     BENCH_CACHE),
# and prints MB/s and files/s per epoch (epoch 1 is cold). rclone runs
# under `env -u AWS_CA_BUNDLE`, so that a machine-wide bundle does not
# decide what it trusts.
#
# Knobs (environment): BENCH_BYTES (1GiB), BENCH_READERS (16), BENCH_EPOCHS
# (3), BENCH_CACHE (rclone's cache size, 100G; give stallfs the same with
# BENCH_MOUNT_FLAGS once it has cache flags), BENCH_MOUNT_FLAGS (extra
# `stallfs mount` flags), BENCH_RCLONE_MODES ("off full"), BENCH_VERIFY (1:
# check every byte in one extra stallfs pass), BENCH_OUT (raw rows,
# out/bench-s3.tsv), STALLFS_BIN (bin/stallfs), STALLFS_VERSITYGW
# (.cache/bin/versitygw, built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
bytes=${BENCH_BYTES:-1GiB}
readers=${BENCH_READERS:-16}
epochs=${BENCH_EPOCHS:-3}
cache=${BENCH_CACHE:-100G}
modes=${BENCH_RCLONE_MODES:-off full}
out=${BENCH_OUT:-out/bench-s3.tsv}
mkdir -p "$(dirname "$out")"
out=$(realpath "$out")

vgw=${STALLFS_VERSITYGW:-.cache/bin/versitygw}
if [ ! -x "$vgw" ]; then
	echo "building versitygw v1.8.0 into .cache/bin (once)"
	GOBIN=$PWD/.cache/bin go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
	vgw=.cache/bin/versitygw
fi
vgw=$(realpath "$vgw")
if ! command -v rclone >/dev/null; then
	echo "installing rclone"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rclone
fi

access=stallfs-bench-access
secret=stallfs-bench-secret-0123456789
work=$(mktemp -d /tmp/stallfs-bench-s3.XXXXXX)
mkdir -p "$work/gw" "$work/meta" "$work/mnt-stallfs"
vgw_pid=""
cleanup() {
	local rc=$?
	for m in "$work"/mnt-*; do
		if grep -qs " $m " /proc/self/mountinfo; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m" || true
		fi
	done
	if [ -n "$vgw_pid" ]; then kill "$vgw_pid" 2>/dev/null || true; wait "$vgw_pid" 2>/dev/null || true; fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port on 127.0.0.1: the first one nothing answers on.
port=17070
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
endpoint=http://127.0.0.1:$port
ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
	"$vgw" --port "127.0.0.1:$port" --keep-alive --quiet posix --sidecar "$work/meta" "$work/gw" \
	>"$work/versitygw.log" 2>&1 &
vgw_pid=$!
for _ in $(seq 200); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	kill -0 "$vgw_pid" || { cat "$work/versitygw.log" >&2; exit 1; }
	sleep 0.05
done

export RCLONE_CONFIG=$work/rclone.conf
cat >"$RCLONE_CONFIG" <<CONF
[vgw]
type = s3
provider = Other
access_key_id = $access
secret_access_key = $secret
endpoint = $endpoint
region = us-east-1
force_path_style = true
CONF
rcl() { env -u AWS_CA_BUNDLE rclone "$@"; }

go build -o "$work/epoch-reader" ./scripts/epoch-reader
reader=$work/epoch-reader
echo "generating a ~$bytes ImageNet-like dataset"
go run ./scripts/gen-dataset -out "$work/data" -bytes "$bytes" -seed 1
echo "uploading it to versitygw at $endpoint"
rcl mkdir vgw:bench
rcl copy --transfers 16 --checkers 16 "$work/data" vgw:bench

wait_mounted() {
	for _ in $(seq 600); do
		grep -qs " $1 " /proc/self/mountinfo && return 0
		sleep 0.05
	done
	echo "bench-s3: $1 did not mount" >&2
	return 1
}

: >"$out"
echo "stallfs: $epochs epochs, $readers readers"
AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1 \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
	"$bin" mount --daemon --log-file "$work/stallfs.log" --s3-endpoint "$endpoint" --s3-path-style \
	${BENCH_MOUNT_FLAGS:-} s3://bench "$work/mnt-stallfs"
if [ "${BENCH_VERIFY:-0}" = 1 ]; then
	"$reader" -dir "$work/mnt-stallfs" -epochs 1 -readers "$readers" -verify-dir "$work/data" -format tsv >/dev/null
	echo "  every byte verified"
fi
"$reader" -dir "$work/mnt-stallfs" -epochs "$epochs" -readers "$readers" -seed 7 -format tsv -label stallfs | tee -a "$out" >/dev/null
"$bin" unmount "$work/mnt-stallfs"

for mode in $modes; do
	m=$work/mnt-rclone-$mode
	mkdir -p "$m"
	echo "rclone mount --vfs-cache-mode $mode: $epochs epochs, $readers readers"
	rcl mount vgw:bench "$m" --read-only --daemon --vfs-cache-mode "$mode" \
		--cache-dir "$work/rclone-cache" --vfs-cache-max-size "$cache" --dir-cache-time 1h \
		--log-file "$work/rclone-$mode.log"
	wait_mounted "$m"
	"$reader" -dir "$m" -epochs "$epochs" -readers "$readers" -seed 7 -format tsv -label "rclone-$mode" | tee -a "$out" >/dev/null
	fusermount3 -u "$m"
done

cores=$(nproc)
mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)
files=$(awk 'NR==1 {print $4}' "$out")
size=$(awk 'NR==1 {printf "%.2f GB", $5/1e9}' "$out")
echo
echo "dataset: $files files, $size on versitygw v1.8.0 (posix, local disk, 127.0.0.1); $readers readers; $cores cores, $mem"
echo "stallfs mount flags: ${BENCH_MOUNT_FLAGS:-(defaults)}; $(rclone version 2>/dev/null | head -1), cache $cache"
echo
# Rows: label epoch readers files bytes seconds MB/s files/s.
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
}' "$out"
echo
echo "raw rows: $out"
