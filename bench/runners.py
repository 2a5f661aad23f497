"""How bench/compare.py builds and runs each peer: Chorus (chorus-perf under
chorusrun), Open MPI (mpi_collectives under mpirun) and Gloo (gloo_collectives,
N processes started here with a file-store rendezvous).

Every runner returns rows (size in bytes, seconds per iteration, algorithm or None)
with the nccl-tests meaning of size and time (see tools/chorus-perf --help).
"""
import os
import pathlib
import shutil
import subprocess
import tempfile


class RunError(Exception):
    """A run that failed, timed out or printed no rows."""


def bus_factor(coll, n):
    """busbw = algbw * factor, the factors of chorus-perf and nccl-tests."""
    if coll == "allreduce":
        return 2 * (n - 1) / n
    if coll in ("broadcast", "reduce"):
        return 1.0
    return (n - 1) / n


def busbw(coll, n, size, seconds):
    """GB/s, or None without a time."""
    if seconds is None or seconds <= 0:
        return None
    return size / seconds / 1e9 * bus_factor(coll, n)


def run_command(cmd, timeout, env=None):
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RunError(f"timed out after {timeout:g} s: {' '.join(map(str, cmd))}")
    if done.returncode != 0:
        # The last lines: a launcher's verdict comes after the failing rank's own message.
        tail = " | ".join((done.stderr.strip().splitlines() or ["(no stderr)"])[-6:])
        raise RunError(f"exit {done.returncode}: {tail}")
    return done.stdout


def peer_rows(text, coll):
    """Rows of mpi_collectives / gloo_collectives: 'name size count time_us algbw busbw'."""
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 6 and not line.startswith("#") and f[0] == coll:
            rows.append((int(f[1]), float(f[3]) * 1e-6, None))
    if not rows:
        raise RunError("no result rows in the output")
    return rows


def size_args(first, last, factor, iters, warmup):
    return ["-b", str(first), "-e", str(last), "-f", f"{factor:g}", "-n", str(iters),
            "-w", str(warmup)]


class Chorus:
    name = "chorus"

    def __init__(self, build, transport, timeout):
        self.chorusrun = build / "tools" / "chorusrun" / "chorusrun"
        self.perf = build / "tools" / "chorus-perf" / "chorus-perf"
        self.transport = transport
        self.timeout = timeout

    def describe(self):
        t = self.transport if self.transport != "default" else "Chorus default"
        return f"{self.perf} under chorusrun, -c 0, transport {t}"

    def run(self, coll, n, first, last, factor, iters, warmup):
        env = dict(os.environ)
        env.pop("CHORUS_TRANSPORT", None)
        if self.transport != "default":
            env["CHORUS_TRANSPORT"] = self.transport
        cmd = [str(self.chorusrun), "-n", str(n), str(self.perf), "-t", coll, "-c", "0",
               "-d", "float32", "-o", "sum"] + size_args(first, last, factor, iters, warmup)
        rows = []
        for line in run_command(cmd, self.timeout, env).splitlines():
            # size count type redop root time algbw busbw #wrong algorithm
            f = line.split()
            if len(f) >= 9 and not line.startswith("#") and f[0].isdigit():
                rows.append((int(f[0]), float(f[5]) * 1e-6, f[9] if len(f) > 9 else None))
        if not rows:
            raise RunError("chorus-perf printed no result rows")
        return rows


class OpenMpi:
    name = "ompi"

    def __init__(self, binary, timeout):
        self.binary = binary
        self.timeout = timeout
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.single_copy = "cma"
        if not self._cma_works():
            # Containers often forbid process_vm_readv (CMA); shared memory still works.
            self.env["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"
            self.single_copy = "none (CMA not permitted here)"

    def _cma_works(self):
        cmd = self._cmd("allreduce", 2, 1 << 20, 1 << 20, 8, 2, 1)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout,
                                  env=self.env)
        except subprocess.TimeoutExpired:
            return False
        complaint = "process_vm_readv" in done.stderr or "single_copy" in done.stderr
        return done.returncode == 0 and not complaint

    def _cmd(self, coll, n, first, last, factor, iters, warmup):
        return (["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
                 "-np", str(n), str(self.binary), "-t", coll]
                + size_args(first, last, factor, iters, warmup))

    def describe(self):
        version = run_command(["mpirun", "--version"], 30).splitlines()[0]
        return (f"{version}, mpirun --oversubscribe --bind-to none, vader shared memory, "
                f"single copy {self.single_copy}")

    def run(self, coll, n, first, last, factor, iters, warmup):
        out = run_command(self._cmd(coll, n, first, last, factor, iters, warmup), self.timeout,
                          self.env)
        return peer_rows(out, coll)


class Gloo:
    name = "gloo"

    def __init__(self, binary, timeout):
        self.binary = binary
        self.timeout = timeout

    def describe(self):
        try:
            version = run_command(["dpkg-query", "-W", "-f", "${Version}", "libgloo-dev"], 30)
        except (RunError, OSError):
            version = "version unknown"
        return f"Gloo (Debian libgloo-dev {version}), tcp transport on 127.0.0.1, file store"

    def run(self, coll, n, first, last, factor, iters, warmup):
        with tempfile.TemporaryDirectory(prefix="gloo-store-") as store:
            procs = [subprocess.Popen(
                [str(self.binary), "-R", str(r), "-N", str(n), "-s", store, "-t", coll]
                + size_args(first, last, factor, iters, warmup),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(n)]
            outputs = []
            try:
                for p in procs:
                    outputs.append(p.communicate(timeout=self.timeout))
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                    p.wait()
                raise RunError(f"timed out after {self.timeout:g} s")
            for p, (_, err) in zip(procs, outputs):
                if p.returncode != 0:
                    tail = (err.strip().splitlines() or ["(no stderr)"])[-1]
                    raise RunError(f"exit {p.returncode}: {tail}")
            return peer_rows(outputs[0][0], coll)


def build_chorus(build):
    """Builds chorusrun and chorus-perf with scripts/build.sh when they are missing."""
    root = pathlib.Path(__file__).resolve().parent.parent
    if (build / "tools" / "chorus-perf" / "chorus-perf").exists() and \
            (build / "tools" / "chorusrun" / "chorusrun").exists():
        return
    env = dict(os.environ, CHORUS_BUILD_TARGETS="chorusrun chorus-perf")
    subprocess.run(["bash", str(root / "scripts" / "build.sh"), str(build)], check=True, env=env)


def build_peers(peer_build, peers):
    """Compiles the peer benchmarks (needs bench/setup-peers.sh to have run)."""
    src = pathlib.Path(__file__).resolve().parent / "peers"
    peer_build.mkdir(parents=True, exist_ok=True)
    cmds = {
        "ompi": ["mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
                 str(peer_build / "mpi_collectives"), str(src / "mpi_collectives.c"), "-lm"],
        "gloo": ["g++", "-std=c++20", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
                 str(peer_build / "gloo_collectives"), str(src / "gloo_collectives.cpp"),
                 "-lgloo", "-pthread"],
    }
    for name in peers:
        if name in cmds:
            if shutil.which(cmds[name][0]) is None:
                raise SystemExit(f"{cmds[name][0]} not found: run bench/setup-peers.sh first")
            subprocess.run(cmds[name], check=True)


def make_peers(a, root, peer_build):
    build_peers(peer_build, a.peers)
    peers = []
    for name in a.peers:
        if name == "chorus":
            build = pathlib.Path(a.chorus_build)
            build_chorus(build)
            peers.append(Chorus(build, a.transport, a.timeout))
        elif name == "ompi":
            peers.append(OpenMpi(peer_build / "mpi_collectives", a.timeout))
        else:
            peers.append(Gloo(peer_build / "gloo_collectives", a.timeout))
    return peers
