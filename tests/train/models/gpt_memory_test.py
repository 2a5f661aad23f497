#!/usr/bin/python3
"""The GPT block's activation bytes, measured by bench/gpt/gpt_bench's counting allocator,
equal the formula of docs/parallel.md (bench/gpt/activation_memory.py) exactly:
one process, 2 ranks at tp 2 without and with sequence parallelism, and at cp 2 (odd sizes:
s 6, b 3, h 20, a 4).

    gpt_memory_test.py CHORUSRUN GPT_BENCH
"""
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "bench", "gpt"))
from activation_memory import activation_formula  # noqa: E402

S, B, H, A = 6, 3, 20, 4


def measured(chorusrun, bench, ranks, tp, sp, cp=1):
    args = [bench, "--tp", str(tp), "--cp", str(cp), "--layers", "3", "--hidden", str(H), "--heads", str(A),
            "--seq", str(S), "--batch", str(B), "--steps", "1", "--warmup", "0"]
    if sp:
        args.append("--sequence-parallel")
    cmd = args if ranks == 1 else [chorusrun, "-n", str(ranks), "--timeout", "60"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    fields = dict(kv.split("=") for kv in out.stdout.split("gpt_bench ", 1)[1].split())
    return int(fields["activation_bytes_per_layer"])


def main():
    chorusrun, bench = sys.argv[1], sys.argv[2]
    failures = []
    for ranks, tp, sp, cp in [(1, 1, False, 1), (2, 2, False, 1), (2, 2, True, 1), (2, 1, False, 2)]:
        got = measured(chorusrun, bench, ranks, tp, sp, cp)
        want = activation_formula(S, B, H, A, tp, sp, cp)
        print(f"ranks {ranks} tp {tp} cp {cp} sp {int(sp)}: measured {got}, formula {want}")
        if got != want:
            failures.append(f"tp {tp} cp {cp} sp {int(sp)}: measured {got} bytes per layer, "
                            f"formula {want}")
    if failures:
        sys.exit("\n".join(failures))


if __name__ == "__main__":
    main()
