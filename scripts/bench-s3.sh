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
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

bin=$(realpath "${STALLFS_BIN:-bin/stallfs}")
bytes=${BENCH_BYTES:-1GiB}
readers=${BENCH_READERS:-16}
epochs=${BENCH_EPOCHS:-3}
cache=${BENCH_CACHE:-100G}
modes=${BENCH_RCLONE_MODES:-off full}
out=$(bench_out "${BENCH_OUT:-out/bench-s3.tsv}")

vgw=$(versitygw_bin)
need_rclone

access=stallfs-bench-access
secret=stallfs-bench-secret-0123456789
work=$(mktemp -d /tmp/stallfs-bench-s3.XXXXXX)
mkdir -p "$work/gw" "$work/meta" "$work/mnt-stallfs"
vgw_pid=""
cleanup() {
	local rc=$?
	unmount_fuse "$work"/mnt-*
	stop_pid "$vgw_pid"
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port 17070)
endpoint=http://127.0.0.1:$port
ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
	"$vgw" --port "127.0.0.1:$port" --keep-alive --quiet posix --sidecar "$work/meta" "$work/gw" \
	>"$work/versitygw.log" 2>&1 &
vgw_pid=$!
wait_port "$port" "$vgw_pid" "$work/versitygw.log" 200

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

reader=$(build_reader "$work")
echo "generating a ~$bytes ImageNet-like dataset"
go run ./scripts/gen-dataset -out "$work/data" -bytes "$bytes" -seed 1
echo "uploading it to versitygw at $endpoint"
rcl mkdir vgw:bench
rcl copy --transfers 16 --checkers 16 "$work/data" vgw:bench

: >"$out"
echo "stallfs: $epochs epochs, $readers readers"
AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1 \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
	"$bin" mount --daemon --log-file "$work/stallfs.log" --s3-endpoint "$endpoint" --s3-path-style \
	${BENCH_MOUNT_FLAGS:-} s3://bench "$work/mnt-stallfs"
verify_mount "$work/mnt-stallfs" "$work/data"
read_epochs "$work/mnt-stallfs" stallfs "$readers"
"$bin" unmount "$work/mnt-stallfs"

rclone_epochs vgw:bench rcl

echo
echo "dataset: $(rows_summary "$out") on versitygw v1.8.0 (posix, local disk, 127.0.0.1); $readers readers; $(host_summary)"
echo "stallfs mount flags: ${BENCH_MOUNT_FLAGS:-(defaults)}; $(rclone version 2>/dev/null | head -1), cache $cache"
echo
epoch_table "$out"
echo
echo "raw rows: $out"
