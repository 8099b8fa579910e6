#!/usr/bin/env bash
# scripts/bench-list.sh: listing rate of object stores at ImageNet scale.
# Fills versitygw (posix backend on local disk) and Azurite (3.37.0, pinned
# in testdata/azurite, persisted on local disk) with BENCH_OBJECTS (200000)
# empty objects in ImageNet layout (train/CLASS/CLASS_N.JPEG, 1,281 a
# class: 157 classes), uploaded in parallel by scripts/put-objects, then
# lists each store with:
#   - stallfs's backend Walk (scripts/put-objects walk, the code a mount
#     runs), flat (list concurrency 1: one paginated listing, as before) and
#     with the parallel prefix listing (BENCH_LIST_CONC, "1,16,32" on S3;
#     BENCH_AZURE_LIST_CONC, "1,2" on Azurite, whose every listing scans
#     the container: more at once run past the try timeout);
#   - `stallfs mount --daemon`, which returns once the tree is listed and
#     the mount is ready (default flags; STALLFS_BIN, else built from this
#     tree, skipped if that fails);
#   - `rclone lsf -R` (Debian rclone, directory by directory, 8 checkers)
#     and `rclone lsf -R --fast-list` (one recursive listing);
# BENCH_RUNS (2) times each, and prints objects/s (the best run) as a
# table. Raw rows go to BENCH_OUT (out/bench-list.tsv): store, lister,
# run, objects, seconds, objects/s.
#
# With BENCH_LIST_RTT set (e.g. 20ms), every lister runs a second time
# through a proxy that delays each request by that much (store "s3+20ms"):
# a remote store's round trip, which the parallel listing overlaps.
#
# The stores live in BENCH_LIST_DIR (.cache/bench-list) and are reused by
# the next run when they hold the same number of objects; delete the
# directory to upload again. BENCH_STORES ("s3 azure") selects the stores.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

objects=${BENCH_OBJECTS:-200000}
s3_conc=${BENCH_LIST_CONC:-1,16,32}
az_conc=${BENCH_AZURE_LIST_CONC:-1,2}
runs=${BENCH_RUNS:-2}
rtt=${BENCH_LIST_RTT:-}
stores=${BENCH_STORES:-s3 azure}
data=$(realpath -m "${BENCH_LIST_DIR:-.cache/bench-list}")
out=$(bench_out "${BENCH_OUT:-out/bench-list.tsv}")

vgw=$(versitygw_bin)
azdir=testdata/azurite
if ! grep -qs '"version": "3.37.0"' "$azdir/node_modules/azurite/package.json"; then
	echo "npm ci --prefix $azdir"
	npm ci --no-audit --no-fund --prefix "$azdir" >/dev/null
fi
need_rclone

# The emulator's well-known development account (public, not a secret).
account=devstoreaccount1
key='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
access=stallfs-bench-access
secret=stallfs-bench-secret-0123456789

work=$(mktemp -d /tmp/stallfs-bench-list.XXXXXX)
mkdir -p "$work/mnt" "$data"
pids=()
cleanup() {
	local rc=$? p
	unmount_fuse "$work/mnt"
	for p in "${pids[@]}"; do stop_pid "$p"; done
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$work/put-objects" ./scripts/put-objects
if [ -n "${STALLFS_BIN:-}" ]; then
	bin=$(realpath "$STALLFS_BIN")
elif go build -o "$work/stallfs" ./cmd/stallfs; then
	bin=$work/stallfs
else
	echo "bench-list: cannot build stallfs; no mount rows" >&2
	bin=""
fi
export RCLONE_CONFIG=$work/rclone.conf
: >"$RCLONE_CONFIG"
: >"$out"

# timed LABEL CMD...: run CMD, print its wall seconds; CMD's stdout goes to
# $work/LABEL.out.
timed() {
	local label=$1 t0 t1
	shift
	t0=$(date +%s.%N)
	"$@" >"$work/$label.out"
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

# row STORE LISTER RUN OBJECTS SECONDS: append a raw row.
row() {
	printf '%s\t%s\t%s\t%s\t%.3f\t%.0f\n' "$1" "$2" "$3" "$4" "$5" "$(echo "$4 / $5" | bc -l)" >>"$out"
}

# start_proxy ENDPOINT: start a proxy to ENDPOINT that delays each request
# by $rtt; set slow to its base URL (ENDPOINT's path kept) and proxy_pid.
start_proxy() {
	local path=${1#http://*/}
	[ "$path" = "$1" ] && path=""
	: >"$work/proxy.addr"
	"$work/put-objects" -endpoint "$1" -rtt "$rtt" proxy >"$work/proxy.addr" 2>"$work/proxy.log" &
	proxy_pid=$!
	pids+=("$proxy_pid")
	for _ in $(seq 200); do [ -s "$work/proxy.addr" ] && break; sleep 0.05; done
	slow="http://$(cat "$work/proxy.addr")${path:+/$path}"
}

# s3_remote NAME ENDPOINT: add an rclone remote of versitygw at ENDPOINT.
s3_remote() {
	cat >>"$RCLONE_CONFIG" <<CONF
[$1]
type = s3
provider = Other
access_key_id = $access
secret_access_key = $secret
endpoint = $2
region = us-east-1
force_path_style = true
CONF
}

# bench LABEL KIND REMOTE ENDPOINT MOUNTSOURCE [MOUNTFLAGS...]: the
# listers over one filled store of KIND (s3, azure) at ENDPOINT, reported
# as store LABEL. The store's environment (credentials) is set by the
# caller.
bench() {
	local store=$1 kind=$2 remote=$3 endpoint=$4 source=$5 r line n s c conc=$s3_conc
	shift 5
	[ "$kind" = azure ] && conc=$az_conc
	echo "$store: stallfs Walk, list concurrency $conc, $runs runs each"
	"$work/put-objects" -store "$kind" -endpoint "$endpoint" -conc "$conc" -runs "$runs" walk >"$work/walk.tsv"
	r=0
	while IFS=$'\t' read -r _ c n _ s _; do
		if [ "$n" != "$objects" ]; then
			echo "bench-list: $store holds $n objects, want $objects; delete $data and run again" >&2
			exit 1
		fi
		if [ "$c" = 1 ]; then line="stallfs walk, flat"; else line="stallfs walk, $c at once"; fi
		r=$((r % runs + 1))
		row "$store" "$line" "$r" "$n" "$s"
	done <"$work/walk.tsv"
	if [ -n "$bin" ]; then
		echo "$store: stallfs mount --daemon (ready = listed)"
		for r in $(seq "$runs"); do
			s=$(timed mount "$bin" mount --daemon --log-file "$work/stallfs-$store.log" "$@" "$source" "$work/mnt")
			n=$(find "$work/mnt" -type f | wc -l)
			unmount_stallfs "$bin" "$work/mnt"
			row "$store" "stallfs mount (default flags)" "$r" "$n" "$s"
		done
	fi
	for flags in "" "--fast-list"; do
		echo "$store: rclone lsf -R $flags"
		for r in $(seq "$runs"); do
			# shellcheck disable=SC2086
			s=$(timed rclone env -u AWS_CA_BUNDLE rclone lsf -R --files-only $flags "$remote")
			n=$(wc -l <"$work/rclone.out")
			row "$store" "rclone lsf -R${flags:+ $flags}" "$r" "$n" "$s"
		done
	done
}

for store in $stores; do
	case $store in
	s3)
		mkdir -p "$data/s3/gw" "$data/s3/meta"
		port=$(free_port 17270)
		endpoint=http://127.0.0.1:$port
		ROOT_ACCESS_KEY=$access ROOT_SECRET_KEY=$secret \
			"$vgw" --port "127.0.0.1:$port" --keep-alive --quiet posix --sidecar "$data/s3/meta" "$data/s3/gw" \
			>"$work/versitygw.log" 2>&1 &
		vgw_pid=$!
		pids+=("$vgw_pid")
		wait_port "$port" "$vgw_pid" "$work/versitygw.log" 200
		export AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1 \
			AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
		if [ "$(cat "$data/s3.objects" 2>/dev/null)" != "$objects" ]; then
			echo "s3: uploading $objects objects to versitygw at $endpoint"
			rm -f "$data/s3.objects"
			"$work/put-objects" -store s3 -endpoint "$endpoint" -objects "$objects" put | tee "$work/put-s3.txt"
			echo "$objects" >"$data/s3.objects"
		else
			echo "s3: reusing the $objects objects in $data/s3"
		fi
		s3_remote vgw "$endpoint"
		bench s3 s3 vgw:bench "$endpoint" s3://bench --s3-endpoint "$endpoint" --s3-path-style
		if [ -n "$rtt" ]; then
			start_proxy "$endpoint"
			s3_remote vgwslow "$slow"
			bench "s3+$rtt" s3 vgwslow:bench "$slow" s3://bench --s3-endpoint "$slow" --s3-path-style
			stop_pid "$proxy_pid"
		fi
		stop_pid "$vgw_pid"
		;;
	azure)
		mkdir -p "$data/azurite"
		port=$(free_port 17370)
		endpoint=http://127.0.0.1:$port/$account
		(cd "$data/azurite" && exec node "$OLDPWD/$azdir/node_modules/azurite/dist/src/blob/main.js" \
			--blobHost 127.0.0.1 --blobPort "$port" --location "$data/azurite" \
			--skipApiVersionCheck --loose --silent \
			>"$work/azurite.log" 2>&1) &
		az_pid=$!
		pids+=("$az_pid")
		wait_port "$port" "$az_pid" "$work/azurite.log" 1200
		export AZURE_STORAGE_ACCESS_KEY=$key
		if [ "$(cat "$data/azure.objects" 2>/dev/null)" != "$objects" ]; then
			echo "azure: uploading $objects objects to Azurite at $endpoint"
			rm -f "$data/azure.objects"
			"$work/put-objects" -store azure -endpoint "$endpoint" -objects "$objects" put | tee "$work/put-azure.txt"
			echo "$objects" >"$data/azure.objects"
		else
			echo "azure: reusing the $objects objects in $data/azurite"
		fi
		cat >>"$RCLONE_CONFIG" <<CONF
[az]
type = azureblob
sas_url = $("$work/put-objects" -store azure -endpoint "$endpoint" sas)
CONF
		bench azure azure az: "$endpoint" "az://$account/bench" --azure-endpoint "$endpoint"
		if [ -n "$rtt" ]; then
			start_proxy "$endpoint"
			cat >>"$RCLONE_CONFIG" <<CONF
[azslow]
type = azureblob
sas_url = $("$work/put-objects" -store azure -endpoint "$slow" sas)
CONF
			bench "azure+$rtt" azure azslow: "$slow" "az://$account/bench" --azure-endpoint "$slow"
			stop_pid "$proxy_pid"
		fi
		# Azurite saves its metadata on a clean stop: the next run reuses it.
		stop_pid "$az_pid"
		;;
	*)
		echo "bench-list: unknown store $store" >&2
		exit 2
		;;
	esac
done

echo
printf '%-12s %-32s %9s %9s %11s\n' store lister objects seconds objects/s
sort -t$'\t' -k1,1 -k2,2 -k5,5g "$out" | awk -F'\t' '!seen[$1 FS $2]++ {
	printf "%-12s %-32s %9d %9.2f %11d\n", $1, $2, $4, $5, $6 }'
echo
for f in "$work"/put-*.txt; do [ -e "$f" ] && cat "$f"; done
echo "$objects objects in ImageNet layout ($(((objects + 1280) / 1281)) classes of 1,281 below train/), best of $runs runs;" \
	"versitygw v1.8.0 (posix, local disk) and Azurite 3.37.0 (local disk), 127.0.0.1; $(rclone version 2>/dev/null | head -1); $(host_summary)"
