#!/usr/bin/python3
"""Reference epoch orders from the real PyTorch / torchvision.

Reads a JSON list of cases on stdin, writes a JSON list of results (same
order) on stdout. Used by stallfs's prefetch tests; run with Debian's
/usr/bin/python3 (apt-get install python3-torch python3-torchvision).

Case kinds:
  {"kind": "random", "n", "seed", "epochs", "num_samples"?, "replacement"?, "hash"?}
      RandomSampler(range(n), generator=Generator().manual_seed(seed)),
      iterated to the end once per epoch.
  {"kind": "distributed", "n", "seed", "epochs", "world", "drop_last", "shuffle", "hash"?, "ranks"?}
      DistributedSampler for every rank (or the given ranks);
      result[epoch][k] for the k-th rank.
  {"kind": "global", "n", "manual_seed", "pre_draws", "epochs", "workers",
   "persistent", "batch", "num_samples"?, "replacement"?}
      torch.manual_seed(manual_seed); torch.rand(pre_draws);
      state = torch.get_rng_state(); then a DataLoader(shuffle=True, no
      generator) over a dataset whose __getitem__ returns its index.
      Result: {"state": hex of state, "epochs": [[indices read]...]}.
  {"kind": "imagefolder", "root"}
      torchvision.datasets.ImageFolder(root).samples paths relative to root.
  {"kind": "loader_reads", "root", "world", "rank", "seed", "epochs", "workers",
   "batch", "prefetch_factor", "drop_last"}
      DistributedSampler(ImageFolder(root)) in a DataLoader with workers;
      returns, per epoch, the paths (relative to root) in the order the
      workers' loader opened them (by time stamp across processes).
  {"kind": "version"}
      torch and torchvision versions.
"""
import hashlib
import json
import os
import sys

import torch
import torch.utils.data as tud


def digest(xs):
    return hashlib.sha256(",".join(map(str, xs)).encode()).hexdigest()


def out(xs, case):
    return digest(xs) if case.get("hash") else xs


class Indexed(tud.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def run(case):
    kind = case["kind"]
    if kind == "version":
        import torchvision
        return {"torch": torch.__version__, "torchvision": torchvision.__version__}
    if kind == "random":
        g = torch.Generator()
        g.manual_seed(case["seed"])
        s = tud.RandomSampler(range(case["n"]), replacement=case.get("replacement", False),
                              num_samples=case.get("num_samples"), generator=g)
        return [out(list(s), case) for _ in range(case["epochs"])]
    if kind == "distributed":
        res = []
        for e in range(case["epochs"]):
            row = []
            for r in case.get("ranks") or range(case["world"]):
                s = tud.DistributedSampler(range(case["n"]), num_replicas=case["world"], rank=r,
                                           shuffle=case["shuffle"], seed=case["seed"],
                                           drop_last=case["drop_last"])
                s.set_epoch(e)
                row.append(out(list(s), case))
            res.append(row)
        return res
    if kind == "global":
        torch.manual_seed(case["manual_seed"])
        if case["pre_draws"]:
            torch.rand(case["pre_draws"])
        state = torch.get_rng_state()
        ds = Indexed(case["n"])
        kw = {}
        if case.get("num_samples") or case.get("replacement"):
            sampler = tud.RandomSampler(ds, replacement=case.get("replacement", False),
                                        num_samples=case.get("num_samples"))
            kw["sampler"] = sampler
        else:
            kw["shuffle"] = True
        loader = tud.DataLoader(ds, batch_size=case["batch"], num_workers=case["workers"],
                                persistent_workers=case["persistent"], **kw)
        epochs = []
        for _ in range(case["epochs"]):
            got = []
            for b in loader:
                got.extend(int(x) for x in b)
            epochs.append(got)
        return {"state": bytes(state.numpy().tobytes()).hex(), "epochs": epochs}
    if kind == "loader_reads":
        import tempfile
        import time
        import torchvision
        root = case["root"]
        log = tempfile.NamedTemporaryFile(prefix="reads", delete=False).name

        def load(p):
            with open(log, "a") as f:
                f.write("%d %s\n" % (time.monotonic_ns(), os.path.relpath(p, root)))
            return 0

        ds = torchvision.datasets.ImageFolder(root, loader=load)
        s = tud.DistributedSampler(ds, num_replicas=case["world"], rank=case["rank"], seed=case["seed"])
        loader = tud.DataLoader(ds, batch_size=case["batch"], sampler=s, num_workers=case["workers"],
                                prefetch_factor=case["prefetch_factor"], drop_last=case["drop_last"])
        epochs = []
        for e in range(case["epochs"]):
            open(log, "w").close()
            s.set_epoch(e)
            for _ in loader:
                pass
            with open(log) as f:
                rows = sorted((int(t), p) for t, p in (line.rstrip("\n").split(" ", 1) for line in f))
            epochs.append([p for _, p in rows])
        os.unlink(log)
        return epochs
    if kind == "imagefolder":
        import torchvision
        root = case["root"]
        ds = torchvision.datasets.ImageFolder(root)
        return [os.path.relpath(p, root) for p, _ in ds.samples]
    raise ValueError("unknown kind %r" % kind)


def main():
    cases = json.load(sys.stdin)
    json.dump([run(c) for c in cases], sys.stdout)


if __name__ == "__main__":
    main()
