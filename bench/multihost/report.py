#!/usr/bin/env python3
"""The report of bench/multihost/run.sh: reads OUT/r<R>/{link.json, logs/job<j>.host0.log,
ompi.txt, tuning.txt, compare.txt} and prints markdown: per ranks per host, each collective's
bus bandwidth at 4-64 MiB beside the link's simultaneous two-way stream and Open MPI's, its
8-byte time beside the link's round trip and Open MPI's, and the algorithms asked for by name
(COMPARE) round by round against the two-way stream."""
import json
import pathlib
import sys


def compared_jobs(path):
    """{job: (algorithm, round, collective)} from run.sh's compare.txt."""
    jobs = {}
    if path.exists():
        for line in path.read_text().splitlines():
            job, algorithm, round_, collective = line.split()
            jobs[int(job)] = (algorithm, int(round_), collective)
    return jobs


def job_rows(log):
    """{(collective, size): (time_us, busbw_GBps, algorithm)} from one chorus-perf report."""
    rows = {}
    collective = None
    for line in log.read_text().splitlines():
        if line.startswith("# Collective:"):
            collective = line.split()[2]
            continue
        f = line.split()
        # Rows of 0 elements (8 B split over 4 ranks) time a call that moves nothing.
        if collective and len(f) >= 10 and f[0].isdigit() and int(f[1]) > 0:
            rows[(collective, int(f[0]))] = (float(f[5]), float(f[7]), f[-1])
    return rows


def chorus_rows(logs, skipped):
    """job_rows of every job but the `skipped` ones."""
    rows = {}
    for log in sorted(logs.glob("job*.host0.log")):
        if int(log.name[3:].split(".")[0]) not in skipped:
            rows.update(job_rows(log))
    return rows


def comparison(logs, jobs, link_GBps):
    """Markdown lines: per collective, size and algorithm, the bus bandwidth of each round and
    its share of the two-way stream."""
    runs = {}
    for job, (algorithm, _, collective) in sorted(jobs.items(), key=lambda j: j[1][1]):
        log = logs / f"job{job}.host0.log"
        if not log.exists():
            continue
        for (c, size), (_, bus, ran) in sorted(job_rows(log).items()):
            if c == collective and size >= 1 << 20:
                runs.setdefault((c, size, algorithm), []).append((bus, ran))
    lines = ["| collective | size | asked for | ran | busbw GB/s by round | of the link |",
             "|---|--:|---|---|---|---|"]
    for (c, size, algorithm), found in sorted(runs.items()):
        ran = ", ".join(sorted({r for _, r in found}))
        buses = ", ".join(f"{b:.3f}" for b, _ in found)
        shares = ", ".join(f"{100 * b / link_GBps:.0f}%" for b, _ in found)
        lines.append(f"| {c} | {size >> 20} MiB | {algorithm} | {ran} | {buses} | {shares} |")
    return lines


def ompi_rows(path):
    rows = {}
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 6 and not line.startswith("#") and f[1].isdigit():
            rows[(f[0], int(f[1]))] = (float(f[3]), float(f[5]))
    return rows


def tuning_text(path):
    """"shm alpha 5.1 us, beta 0.30 ns/B; tcp ..." from the tuning file run.sh measured (a link
    the run did not measure, such as shm with one rank per host, is said to be the default)."""
    if not path.exists():
        return ""
    values, measured = {}, set()
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 2 and not line.startswith("#"):
            values[f[0]] = float(f[1])
            if "# measured" in line:
                measured.add(f[0])
    texts = []
    for link in ("shm", "tcp"):
        alpha, beta = link + ".alpha_us", link + ".beta_ns_per_byte"
        if alpha in measured and beta in measured:
            texts.append(f"{link} alpha {values[alpha]:.1f} us, beta {values[beta]:.2f} ns/B")
        else:
            texts.append(f"{link} not measured (the built-in default)")
    return "; ".join(texts)


def main():
    out = pathlib.Path(sys.argv[1])
    print("# Across two simulated hosts, links shaped to 2 Gbit/s\n")
    print("`bench/multihost/run.sh` (scripts/hosts.sh: one network namespace per host, tbf "
          "on every veth). Link: a simultaneous two-way TCP stream between the hosts (GB/s per "
          "direction, the lower direction) and the round trip of 8 bytes, median of 2000. "
          "Bus bandwidth as nccl-tests define it; Chorus and Open MPI 4.1 "
          "(tcp between hosts, vader within one) on the same hosts, one after the other.\n")
    for rdir in sorted(out.glob("r*"), key=lambda p: int(p.name[1:])):
        ranks = int(rdir.name[1:])
        link = json.loads((rdir / "link.json").read_text())
        compared = compared_jobs(rdir / "compare.txt")
        chorus = chorus_rows(rdir / "logs", compared)
        ompi = ompi_rows(rdir / "ompi.txt")
        print(f"## {ranks} rank(s) per host ({2 * ranks} ranks)\n")
        print(f"Link: two-way stream {link['two_way_GBps']:.3f} GB/s per direction, round trip "
              f"{link['rtt_us']:.0f} us.\n")
        tuning = tuning_text(rdir / "tuning.txt")
        if tuning:
            print(f"Chorus's cost model: `chorus-perf --tune` across the hosts in this run, "
                  f"{tuning}.\n")
        print("| collective | size | Chorus busbw GB/s | of the link | Open MPI busbw GB/s | "
              "Chorus / Open MPI | Chorus algorithm |")
        print("|---|--:|--:|--:|--:|--:|---|")
        for (c, size), (t, bus, algo) in sorted(chorus.items()):
            if size < 1 << 20:
                continue
            o = ompi.get((c, size))
            obus = f"{o[1]:.3f}" if o else "-"
            ratio = f"{bus / o[1]:.2f}" if o and o[1] > 0 else "-"
            print(f"| {c} | {size >> 20} MiB | {bus:.3f} | {100 * bus / link['two_way_GBps']:.0f}% "
                  f"| {obus} | {ratio} | {algo} |")
        print("\n| collective | 8 B time us | x the round trip | Open MPI us | Open MPI time / "
              "Chorus time | Chorus algorithm |")
        print("|---|--:|--:|--:|--:|---|")
        for (c, size), (t, bus, algo) in sorted(chorus.items()):
            if size >= 1 << 20:
                continue
            o = ompi.get((c, size))
            ot = f"{o[0]:.1f}" if o else "-"
            ratio = f"{o[0] / t:.2f}" if o and t > 0 else "-"
            print(f"| {c} | {t:.1f} | {t / link['rtt_us']:.2f} | {ot} | {ratio} | {algo} |")
        print()
        if compared:
            print("Algorithms asked for by name (`-a`), taking turns round by round, with the "
                  "same tuning file:\n")
            print("\n".join(comparison(rdir / "logs", compared, link["two_way_GBps"])))
            print()


if __name__ == "__main__":
    main()
