#!/usr/bin/python3
"""Plots of make bench-e2e (scripts/bench-e2e.sh): reads its e2e.csv and
writes, into OUTDIR, for every cache fraction f:

  e2e-time-f<f>.png   epoch time and data stall per system per epoch, with
                      the synthetic (maximum ingestion) and fully cached
                      (prep stall) runs as reference lines;
  e2e-bytes-f<f>.png  backend bytes per epoch per system against the MinIO
                      ideal (D in epoch 1, then (1 - f) x D).

A system named NAME-s3 (the same mount over the emulated S3 store) has
NAME's colour, hatched.

Usage: plot_e2e.py E2E.CSV OUTDIR. Needs Debian's python3-matplotlib.
"""

import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"pagecache": "tab:gray", "rclone": "tab:orange", "stallfs": "tab:blue",
          "stallfs-prefetch": "tab:green"}
ORDER = ["pagecache", "rclone", "stallfs", "stallfs-prefetch", "rclone-s3", "stallfs-s3", "stallfs-prefetch-s3"]


def bar_style(system):
    """Bar colour and hatch of a system."""
    base = system[:-3] if system.endswith("-s3") else system
    return {"color": COLORS.get(base), "hatch": "//" if base != system else None,
            "edgecolor": "white" if base != system else None}


def load(path):
    """Rows of e2e.csv grouped: {(system, f): [row sorted by epoch]}."""
    runs = defaultdict(list)
    with open(path, newline="") as fh:
        for r in csv.DictReader(fh):
            runs[(r["system"], r["f"])].append(r)
    for rows in runs.values():
        rows.sort(key=lambda r: int(r["epoch"]))
    return runs


def num(x):
    """A CSV cell as a float, 0 when empty."""
    return float(x) if x not in ("", None) else 0.0


def plot_time(runs, f, systems, outdir):
    """Epoch time and data stall bars per system per epoch at fraction f."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(14, 4.8))
    width = 0.8 / max(1, len(systems))
    for k, s in enumerate(systems):
        rows = runs[(s, f)]
        xs = [int(r["epoch"]) + (k - (len(systems) - 1) / 2) * width for r in rows]
        a1.bar(xs, [num(r["seconds"]) for r in rows], width, label=s, **bar_style(s))
        a2.bar(xs, [num(r["data_stall_s"]) for r in rows], width, label=s, **bar_style(s))
    for ref, style, label in (("synthetic", ":", "synthetic (max ingestion)"),
                              ("cached", "--", "fully cached (prep stall)")):
        rows = runs.get((ref, ""))
        if not rows:
            continue
        a1.axhline(sum(num(r["seconds"]) for r in rows) / len(rows), color="k", ls=style, lw=1, label=label)
        a2.axhline(sum(num(r["data_stall_s"]) for r in rows) / len(rows), color="k", ls=style, lw=1, label=label)
    a1.set(title=f"epoch time, f = {f}", xlabel="epoch", ylabel="seconds")
    a2.set(title=f"data stall (loop waiting for a batch), f = {f}", xlabel="epoch", ylabel="seconds")
    epochs = sorted({int(r["epoch"]) for s in systems for r in runs[(s, f)]})
    for a in (a1, a2):
        a.set_xticks(epochs)
        a.grid(axis="y", alpha=0.3)
    a1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{outdir}/e2e-time-f{f}.png", dpi=90)
    plt.close(fig)


def plot_bytes(runs, f, systems, outdir):
    """Backend bytes per epoch per system against the MinIO ideal at f."""
    fig, ax = plt.subplots(figsize=(9, 4.8))
    width = 0.8 / max(1, len(systems))
    ideal = None
    for k, s in enumerate(systems):
        rows = runs[(s, f)]
        xs = [int(r["epoch"]) + (k - (len(systems) - 1) / 2) * width for r in rows]
        ax.bar(xs, [num(r["backend_bytes"]) / 1e6 for r in rows], width, label=s, **bar_style(s))
        ideal = ideal or [(int(r["epoch"]), num(r["minio_ideal_bytes"]) / 1e6) for r in rows]
    if ideal:
        ax.step([e for e, _ in ideal], [v for _, v in ideal], where="mid", color="r", lw=2,
                label="MinIO ideal (D, then (1-f)·D)")
        ax.set_xticks([e for e, _ in ideal])
    ax.set(title=f"backend bytes per epoch, f = {f}", xlabel="epoch", ylabel="MB")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{outdir}/e2e-bytes-f{f}.png", dpi=90)
    plt.close(fig)


def main(argv):
    if len(argv) != 3:
        print("usage: plot_e2e.py E2E.CSV OUTDIR", file=sys.stderr)
        return 2
    runs = load(argv[1])
    fractions = sorted({f for (_, f) in runs if f})
    for f in fractions:
        systems = [s for s in ORDER if (s, f) in runs] + \
                  sorted(s for (s, g) in runs if g == f and s not in ORDER)
        plot_time(runs, f, systems, argv[2])
        plot_bytes(runs, f, systems, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
