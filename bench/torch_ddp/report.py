"""The markdown report of ddp_bench.py (printed and written to bench/results/).

Definitions: a cell's step time is the median over its runs of the slowest rank's mean step
time; samples/s = per-rank batch * ranks / step time; gloo/chorus = gloo step / chorus step
(above 1 chorus is faster); chorus/nosync = chorus step / nosync step (1.00 means the gradient
synchronisation costs nothing; the issue's goal is at most 1.10); nocomm/nosync = what torch's
DDP costs by itself (bucket copies, hooks: no backend can remove it); chorus/nocomm = what the
chorus backend adds to that; paired = the median over paired runs of (synchronised step /
unsynchronised step) within one run, the same ratio as chorus/nosync without the spread between
separate runs; paired nocomm = the same ratio for DDP with the hook that communicates nothing
(torch DDP's own share of the paired ratio).
"""

import os
import platform
import statistics
import sys
import time

import models

LOSS_RTOL = 1e-3  # chorus and gloo sum the same gradients, only possibly in another order


HOOK_NAMES = {"cpp": "; chorus modes with chorus_torch.register_avg_hook",
              "python": "; chorus modes with chorus_torch.allreduce_avg_hook"}


def median_step(runs):
    return statistics.median(r["step_s"] for r in runs) if runs else None


def median_paired(runs):
    return statistics.median(r["step_s"] / r["unsynced_s"] for r in runs) if runs else None


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def first_info(cells):
    """Rank 0's description of the run environment, from any successful run."""
    for _, _, runs in cells:
        for mode_runs in runs.values():
            if mode_runs:
                return mode_runs[0]["info"]
    return {}


def header(cells, args, minutes):
    info = first_info(cells)
    command = " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    return [
        "# PyTorch DDP: chorus vs gloo vs no gradient synchronisation",
        "",
        "{} UTC, `{}`, {:.1f} min.".format(time.strftime("%Y-%m-%d %H:%M", time.gmtime()), command, minutes),
        "",
        "Machine: {}, {} cores; torch {}, BLAS `{}`, {} torch thread per rank.".format(
            cpu_name(), os.cpu_count(), info.get("torch", "?"), info.get("blas", "?"), info.get("threads", "?")),
        "Each run: {} warm-up + {} timed steps per rank; {} run(s) per mode, interleaved "
        "({}, ...). Step time: median over runs of the slowest rank's "
        "mean step time. gloo/chorus above 1: chorus faster. chorus/nosync: the cost of "
        "gradient synchronisation (goal <= 1.10). nocomm: DDP with a communication hook that "
        "communicates nothing, so nocomm/nosync is torch DDP's own cost and chorus/nocomm what "
        "the backend adds. paired: chorus DDP taking synchronised and no_sync() steps in turn in "
        "the same processes, each no_sync() step followed by an untimed barrier; the median "
        "over runs of the ratio of the two kinds' median step times. paired nocomm: the same "
        "with nocomm's hook, torch DDP's own share of that ratio.".format(args.warmup, args.steps, args.repeats, ", ".join(args.modes)),
        "DDP options: {}{}.".format("gradient_as_bucket_view=True" if args.bucket_view else "torch's defaults",
                                    HOOK_NAMES.get(args.avg_hook, "")),
        "Ranks' glibc malloc: {} (see ddp_bench.py).".format(args.malloc),
        "",
    ]


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def ratio(step, a, b):
    """step[a] / step[b] formatted, "-" when either is missing."""
    both = step.get(a) and step.get(b)
    return fmt(both and step[a] / step[b], ".2f")


def summary_table(cells):
    lines = ["| model | ranks | batch/rank | chorus ms | chorus samples/s | gloo ms | gloo samples/s "
             "| nosync ms | nosync samples/s | nocomm ms | gloo/chorus | chorus/nosync "
             "| nocomm/nosync | chorus/nocomm | paired chorus/nosync | paired nocomm/nosync |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for model, ranks, runs in cells:
        batch = models.MODELS[model][0]
        step = {mode: median_step(r) for mode, r in runs.items() if not mode.startswith("paired")}
        row = [model, str(ranks), str(batch)]
        for mode in ("chorus", "gloo", "nosync"):
            s = step[mode]
            row += [fmt(s and s * 1e3, ".1f"), fmt(s and batch * ranks / s, ".0f")]
        row.append(fmt(step["nocomm"] and step["nocomm"] * 1e3, ".1f"))
        row += [ratio(step, "gloo", "chorus"), ratio(step, "chorus", "nosync"),
                ratio(step, "nocomm", "nosync"), ratio(step, "chorus", "nocomm"),
                fmt(median_paired(runs["paired"]), ".2f"), fmt(median_paired(runs["paired-nocomm"]), ".2f")]
        lines.append("| " + " | ".join(row) + " |")
    return lines + [""]


def models_table(cells):
    lines = ["## Models", "", "| model | parameters | gradient MB (fp32) | batch/rank | context | data | architecture |",
             "|---|--:|--:|--:|--:|---|---|"]
    seen = set()
    for model, _, runs in cells:
        info = next((r[0]["info"] for r in runs.values() if r), None)
        if model in seen or info is None:
            continue
        seen.add(model)
        batch, context, description = models.MODELS[model]
        lines.append("| {} | {:,} | {:.1f} | {} | {} | {} | {} |".format(
            model, info["params"], info["params"] * 4 / 2**20, batch, context or "-", info["data"], description))
    return lines + [""]


def runs_table(cells):
    lines = ["## Every run, in run order", "",
             "Step time in ms (slowest rank) / CPU time of rank 0 per step in ms (all its threads; "
             "below the step time when the rank waited for the others or for a core).", "",
             "paired, paired nocomm: synchronised / unsynchronised step median in ms (slowest rank "
             "of each).", "",
             "| model | ranks | chorus | gloo | nosync | nocomm | paired | paired nocomm |",
             "|---|--:|---|---|---|---|---|---|"]
    for model, ranks, runs in cells:
        row = [" ".join("{:.1f}/{:.1f}".format(r["step_s"] * 1e3, r["info"]["cpu_s"] * 1e3) for r in runs[m]) or "-"
               for m in ("chorus", "gloo", "nosync", "nocomm")]
        for m in ("paired", "paired-nocomm"):
            row.append(" ".join("{:.1f}/{:.1f}".format(r["step_s"] * 1e3, r["unsynced_s"] * 1e3)
                                for r in runs[m]) or "-")
        lines.append("| {} | {} | {} |".format(model, ranks, " | ".join(row)))
    return lines + [""]


def loss_check(cells):
    """Same seed, data and averaged gradients: chorus and gloo must end at the same loss."""
    lines = ["## Check: chorus and gloo train the same", ""]
    for model, ranks, runs in cells:
        pairs = list(zip(runs["chorus"], runs["gloo"]))
        if not pairs:
            continue
        worst = max(abs(c["loss"] - g["loss"]) / max(abs(g["loss"]), 1e-12) for c, g in pairs)
        verdict = "ok" if worst <= LOSS_RTOL else "MISMATCH"
        lines.append("- {} ranks {}: last loss on rank 0 chorus {:.6f}, gloo {:.6f}; largest relative "
                     "difference {:.1e} ({})".format(model, ranks, pairs[0][0]["loss"], pairs[0][1]["loss"],
                                                     worst, verdict))
    return lines + [""]


def markdown(cells, failures, args, minutes):
    lines = header(cells, args, minutes) + summary_table(cells) + models_table(cells)
    lines += runs_table(cells) + loss_check(cells)
    if failures:
        lines += ["## Failed runs", ""] + ["- " + f.replace("\n", "\n  ") for f in failures] + [""]
    return "\n".join(lines)
