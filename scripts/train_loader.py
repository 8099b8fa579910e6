#!/usr/bin/python3
"""A training-shaped PyTorch input loop over an image directory.

torchvision ImageFolder over ROOT with JPEG decode and the standard ImageNet
training transforms (RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize), a DataLoader with worker processes and either a
DistributedSampler (set_epoch every epoch) or shuffle=True with a seeded
generator, and a simulated GPU step of --gpu-ms per batch. It measures what
DS-Analyzer measures: per epoch the wall time, images/s and the data stall
(time the loop waited for the next batch). --synthetic skips all I/O and
decode (the maximum ingestion rate of the simulated GPU).

With --manifest (gen-dataset -manifest: "path<TAB>size<TAB>sha256" lines),
the dataset's loader reads each sample's raw bytes, checks their size and
SHA-256 against the manifest, then decodes them with PIL from memory; any
mismatch or unknown file ends the run with exit status 1.

With --read-cgroup DIR, each DataLoader worker reads the samples' raw
bytes through a small helper process of its own placed in the cgroup DIR
(its pid written to DIR/cgroup.procs before it reads anything). The
kernel charges a page-cache page to the cgroup of the process that reads
it in, so a memory cgroup then limits the page cache of the dataset and
the helpers' few MB of constant memory, not the loop's own memory (which
varies by tens of MB between batches and would lend its slack to the page
cache). The helpers are reaped when their worker exits, so the loop's
/proc/PID/io counts their reads.

Run it with Debian's /usr/bin/python3 (python3-torch, python3-torchvision).
Exit status: 0 ok, 1 checksum mismatch, 2 bad usage.
"""

import argparse
import hashlib
import io
import json
import multiprocessing.util
import os
import subprocess
import sys
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, DistributedSampler
from torchvision import datasets, transforms


class ChecksumError(Exception):
    """A sample's raw bytes do not match the manifest."""


def read_manifest(path):
    """Returns {path: (size, sha256)} of a gen-dataset manifest."""
    entries = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) != 3:
                raise ValueError(f"{path}:{n}: want path<TAB>size<TAB>sha256")
            entries[parts[0]] = (int(parts[1]), parts[2].lower())
    return entries


def manifest_prefix(entries, rel):
    """The manifest's path prefix of the dataset root, found from one sample
    path rel (relative to the root): "" or "train/" for example."""
    if rel in entries:
        return ""
    for p in entries:
        if p.endswith("/" + rel):
            return p[: len(p) - len(rel)]
    raise ChecksumError(f"{rel}: not in the manifest")


# The --read-cgroup helper: reads each path given on a line of stdin and
# writes its length (8 bytes, little-endian) and bytes to stdout.
READ_HELPER = r"""
import sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
for line in inp:
    with open(line.rstrip(b"\n"), "rb") as f:
        raw = f.read()
    out.write(len(raw).to_bytes(8, "little"))
    out.write(raw)
    out.flush()
"""


class CgroupReader:
    """Reads files through a helper process in a cgroup (--read-cgroup).

    One helper per process that reads (each DataLoader worker starts its
    own on first use); it is closed and reaped when that process exits.
    """

    def __init__(self, cgroup):
        self.cgroup = cgroup
        self.pid = None
        self.proc = None

    def __getstate__(self):
        return {"cgroup": self.cgroup, "pid": None, "proc": None}

    def _start(self):
        procs = os.path.join(self.cgroup, "cgroup.procs")

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))

        self.proc = subprocess.Popen([sys.executable, "-c", READ_HELPER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, preexec_fn=enter)
        self.pid = os.getpid()
        multiprocessing.util.Finalize(self, CgroupReader._stop, args=(self.proc,), exitpriority=10)

    @staticmethod
    def _stop(proc):
        proc.stdin.close()
        proc.wait()

    def read(self, path):
        if self.pid != os.getpid():
            self._start()
        self.proc.stdin.write(os.fsencode(path) + b"\n")
        self.proc.stdin.flush()
        head = self.proc.stdout.read(8)
        if len(head) != 8:
            raise OSError(f"{path}: the read helper ended (exit status {self.proc.poll()})")
        n = int.from_bytes(head, "little")
        raw = self.proc.stdout.read(n)
        if len(raw) != n:
            raise OSError(f"{path}: the read helper returned {len(raw)} of {n} bytes")
        return raw


class VerifyingLoader:
    """An ImageFolder loader= that checks the raw bytes before decoding.

    It is pickled into the DataLoader's worker processes; a mismatch raises
    ChecksumError there, which the DataLoader re-raises in the main process.
    """

    def __init__(self, root, entries, prefix, reader=None):
        self.root = root
        self.entries = entries
        self.prefix = prefix
        self.reader = reader

    def __call__(self, path):
        if self.reader is not None:
            raw = self.reader.read(path)
        else:
            with open(path, "rb") as f:
                raw = f.read()
        if self.entries is not None:
            rel = os.path.relpath(path, self.root).replace(os.sep, "/")
            want = self.entries.get(self.prefix + rel)
            if want is None:
                raise ChecksumError(f"{rel}: not in the manifest")
            size, digest = want
            got = hashlib.sha256(raw).hexdigest()
            if len(raw) != size or got != digest:
                raise ChecksumError(
                    f"{rel}: read {len(raw)} bytes sha256 {got}, manifest says {size} bytes sha256 {digest}")
        img = Image.open(io.BytesIO(raw))
        return img.convert("RGB")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", help="ImageFolder root (class directories below it)")
    ap.add_argument("--manifest", help="verify every sample against this gen-dataset manifest")
    ap.add_argument("--read-cgroup", metavar="DIR",
                    help="read the samples through helper processes placed in the cgroup DIR")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--start-epoch", type=int, default=0, help="first epoch number (set_epoch)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=4, help="DataLoader num_workers")
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--sampler", choices=["distributed", "shuffle"], default="distributed",
                    help="DistributedSampler, or shuffle=True with Generator().manual_seed(SEED)")
    ap.add_argument("--seed", type=int, default=0, help="sampler seed (DistributedSampler's default is 0)")
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--drop-last", action="store_true")
    ap.add_argument("--gpu-ms", type=float, default=0.0, help="simulated GPU time per batch (ms)")
    ap.add_argument("--crop", type=int, default=224, help="RandomResizedCrop size")
    ap.add_argument("--synthetic", action="store_true",
                    help="no I/O or decode: random batches of the same shape (max ingestion rate)")
    ap.add_argument("--synthetic-images", type=int, default=0,
                    help="images per synthetic epoch (default: the dataset size, or 1024 without ROOT)")
    ap.add_argument("--epoch-hook", help="shell command run after each epoch (untimed), with STALLFS_EPOCH set")
    ap.add_argument("--json", action="store_true", help="one JSON line per epoch instead of text")
    a = ap.parse_args(argv)
    if not a.synthetic and not a.root:
        ap.error("ROOT is needed unless --synthetic")
    if a.epochs < 1 or a.batch_size < 1 or a.workers < 0 or a.world_size < 1 or not 0 <= a.rank < a.world_size:
        ap.error("want --epochs >= 1, --batch-size >= 1, --workers >= 0, 0 <= --rank < --world-size")
    return a


def build_loader(a):
    """The dataset, sampler and DataLoader of a real (non-synthetic) run."""
    norm = transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])
    tf = transforms.Compose([
        transforms.RandomResizedCrop(a.crop),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        norm,
    ])
    root = os.path.abspath(a.root)
    ds = datasets.ImageFolder(root, transform=tf)
    if len(ds) == 0:
        raise SystemExit(f"train_loader: no images under {root}")
    entries, prefix = None, ""
    if a.manifest:
        entries = read_manifest(a.manifest)
        prefix = manifest_prefix(entries, os.path.relpath(ds.samples[0][0], root).replace(os.sep, "/"))
    reader = CgroupReader(a.read_cgroup) if a.read_cgroup else None
    ds.loader = VerifyingLoader(root, entries, prefix, reader)
    sampler, gen = None, None
    if a.sampler == "distributed":
        sampler = DistributedSampler(ds, num_replicas=a.world_size, rank=a.rank,
                                     shuffle=True, seed=a.seed, drop_last=a.drop_last)
    else:
        gen = torch.Generator().manual_seed(a.seed)
    kw = {}
    if a.workers > 0:
        kw["prefetch_factor"] = a.prefetch_factor
    loader = DataLoader(ds, batch_size=a.batch_size, sampler=sampler, shuffle=sampler is None,
                        generator=gen, num_workers=a.workers, drop_last=False, **kw)
    return ds, sampler, loader


def synthetic_batches(a, n):
    """n images of random data in batches, without I/O (made once)."""
    x = torch.randn(a.batch_size, 3, a.crop, a.crop)
    y = torch.zeros(a.batch_size, dtype=torch.long)
    full, rest = divmod(n, a.batch_size)
    return [(x, y)] * full + ([(x[:rest], y[:rest])] if rest else [])


def run_epoch(batches, gpu_s):
    """Iterates one epoch; returns (images, seconds, stall seconds, first batch seconds)."""
    images, stall, first = 0, 0.0, None
    start = time.perf_counter()
    it = iter(batches)
    while True:
        t0 = time.perf_counter()
        try:
            x, _ = next(it)
        except StopIteration:
            stall += time.perf_counter() - t0
            break
        waited = time.perf_counter() - t0
        stall += waited
        if first is None:
            first = waited
        images += x.shape[0]
        if gpu_s > 0:
            time.sleep(gpu_s)  # the simulated GPU step
    return images, time.perf_counter() - start, stall, first or 0.0


def main(argv):
    a = parse_args(argv)
    torch.set_num_threads(1)
    if a.synthetic:
        n = a.synthetic_images
        if n <= 0:
            n = len(datasets.ImageFolder(a.root)) // a.world_size if a.root else 1024
        ds, sampler, loader = None, None, synthetic_batches(a, n)
    else:
        ds, sampler, loader = build_loader(a)
    mode = "synthetic" if a.synthetic else "real"
    total_images = total_stall = total_time = 0.0
    for e in range(a.start_epoch, a.start_epoch + a.epochs):
        if sampler is not None:
            sampler.set_epoch(e)
        try:
            images, secs, stall, first = run_epoch(loader, a.gpu_ms / 1000.0)
        except Exception as err:  # noqa: BLE001 - the DataLoader re-raises worker errors as their own type
            msg = str(err)
            if isinstance(err, ChecksumError) or "ChecksumError" in msg or "ChecksumError" in type(err).__name__:
                print(f"train_loader: checksum mismatch in epoch {e}: {msg.strip().splitlines()[-1]}", file=sys.stderr)
                return 1
            raise
        row = {
            "mode": mode, "epoch": e, "images": images, "seconds": round(secs, 4),
            "images_per_s": round(images / secs, 2) if secs > 0 else 0.0,
            "stall_seconds": round(stall, 4), "stall_pct": round(100 * stall / secs, 2) if secs > 0 else 0.0,
            "first_batch_seconds": round(first, 4),
            "verified": images if (a.manifest and not a.synthetic) else 0,
            "workers": a.workers, "batch_size": a.batch_size, "gpu_ms": a.gpu_ms,
        }
        total_images += images
        total_stall += stall
        total_time += secs
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"epoch {e}: {secs:.2f}s  {images} images  {row['images_per_s']:.1f} images/s  "
                  f"data stall {stall:.2f}s ({row['stall_pct']:.1f}%)  first batch {first:.2f}s"
                  + (f"  {images} checksums ok" if row["verified"] else ""), flush=True)
        if a.epoch_hook:
            env = dict(os.environ, STALLFS_EPOCH=str(e))
            rc = subprocess.run(a.epoch_hook, shell=True, env=env).returncode
            if rc != 0:
                print(f"train_loader: --epoch-hook exited {rc} after epoch {e}", file=sys.stderr)
                return 2
    if not a.json:
        print(f"total: {total_time:.2f}s  {int(total_images)} images  data stall {total_stall:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
