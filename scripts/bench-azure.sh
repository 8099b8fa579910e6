#!/usr/bin/env bash
# make bench-azure: the epoch benchmark over Azure Blob (Azurite). A
# generated ImageNet-like dataset is uploaded to a real Azurite (the version
# pinned in testdata/azurite, in-memory, 127.0.0.1), then read epoch after
# epoch, in a seeded random order with N concurrent readers
# (scripts/epoch-reader), through
#   - stallfs mount az://devstoreaccount1/bench (--azure-endpoint, key from
#     AZURE_STORAGE_ACCESS_KEY),
#   - rclone mount (Debian rclone) of a container SAS URL, without a cache
#     (--vfs-cache-mode off) and with its disk cache (--vfs-cache-mode full,
#     --vfs-cache-max-size BENCH_CACHE),
# and prints MB/s and files/s per epoch (epoch 1 is cold).
#
# Knobs (environment): BENCH_BYTES (1GiB), BENCH_READERS (16), BENCH_EPOCHS
# (3), BENCH_CACHE (rclone's cache size, 100G; give stallfs the same with
# BENCH_MOUNT_FLAGS once it has cache flags), BENCH_MOUNT_FLAGS (extra
# `stallfs mount` flags), BENCH_RCLONE_MODES ("off full"), BENCH_VERIFY (1:
# check every byte in one extra stallfs pass), BENCH_OUT (raw rows,
# out/bench-azure.tsv), STALLFS_BIN (bin/stallfs).
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
out=$(bench_out "${BENCH_OUT:-out/bench-azure.tsv}")

# The emulator's well-known development account (public, not a secret).
account=devstoreaccount1
key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

azdir=testdata/azurite
if ! grep -qs '"version": "3.37.0"' "$azdir/node_modules/azurite/package.json"; then
	echo "npm ci --prefix $azdir"
	npm ci --no-audit --no-fund --prefix "$azdir" >/dev/null
fi
need_rclone

work=$(mktemp -d /tmp/stallfs-bench-azure.XXXXXX)
mkdir -p "$work/mnt-stallfs" "$work/azurite" "$work/sas"
az_pid=""
cleanup() {
	local rc=$?
	unmount_fuse "$work"/mnt-*
	stop_pid "$az_pid"
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port=$(free_port 17170)
endpoint=http://127.0.0.1:$port/$account
(cd "$work/azurite" && exec node "$OLDPWD/$azdir/node_modules/azurite/dist/src/blob/main.js" \
	--blobHost 127.0.0.1 --blobPort "$port" --inMemoryPersistence --skipApiVersionCheck --loose --silent \
	>"$work/azurite.log" 2>&1) &
az_pid=$!
wait_port "$port" "$az_pid" "$work/azurite.log" 600

# Create the container, upload the dataset (Debian's rclone 1.60 panics
# uploading to Azurite) and make a container SAS URL for rclone, with the
# SDK the backend uses (a throwaway program run in this module).
cat >"$work/sas/main.go" <<'GO'
package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
	"golang.org/x/sync/errgroup"
)

func main() {
	account, key, url, dir := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	cred, err := container.NewSharedKeyCredential(account, key)
	check(err)
	c, err := container.NewClientWithSharedKeyCredential(url, cred, nil)
	check(err)
	ctx := context.Background()
	_, err = c.Create(ctx, nil)
	check(err)
	var g errgroup.Group
	g.SetLimit(16)
	check(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		g.Go(func() error {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = c.NewBlockBlobClient(filepath.ToSlash(rel)).UploadBuffer(ctx, data, nil)
			return err
		})
		return nil
	}))
	check(g.Wait())
	u, err := c.GetSASURL(sas.ContainerPermissions{Read: true, List: true}, time.Now().Add(24*time.Hour), nil)
	check(err)
	fmt.Println(u)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
GO

reader=$(build_reader "$work")
echo "generating a ~$bytes ImageNet-like dataset"
go run ./scripts/gen-dataset -out "$work/data" -bytes "$bytes" -seed 1
echo "uploading it to Azurite at $endpoint"
sas_url=$(go run "$work/sas/main.go" "$account" "$key" "$endpoint/bench" "$work/data")

export RCLONE_CONFIG=$work/rclone.conf
cat >"$RCLONE_CONFIG" <<CONF
[az]
type = azureblob
sas_url = $sas_url
CONF

: >"$out"
echo "stallfs: $epochs epochs, $readers readers"
AZURE_STORAGE_ACCESS_KEY=$key \
	"$bin" mount --daemon --log-file "$work/stallfs.log" --azure-endpoint "$endpoint" \
	${BENCH_MOUNT_FLAGS:-} "az://$account/bench" "$work/mnt-stallfs"
verify_mount "$work/mnt-stallfs" "$work/data"
read_epochs "$work/mnt-stallfs" stallfs "$readers"
"$bin" unmount "$work/mnt-stallfs"

rclone_epochs az: rclone

echo
echo "dataset: $(rows_summary "$out") on Azurite 3.37.0 (in memory, 127.0.0.1); $readers readers; $(host_summary)"
echo "stallfs mount flags: ${BENCH_MOUNT_FLAGS:-(defaults)}; $(rclone version 2>/dev/null | head -1), cache $cache"
echo
epoch_table "$out"
echo
echo "raw rows: $out"
