"""chorus-trace on synthetic dumps: a rank that never arrived, a rank stuck in an
earlier operation, a rank that arrived after the others gave up, a mismatch, a
missing dump, and several jobs in one place.
Run by ctest with CHORUS_TRACE_SCRIPT naming the script."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.environ.get("CHORUS_TRACE_SCRIPT",
                        os.path.join(os.path.dirname(__file__), "../../tools/chorus-trace/chorus-trace"))
DUMPED_AT = 1700000100.0


def op(seq, name="allreduce", state="completed", issued_ago=10.0, error="", peer=-1, count=4,
       dtype="float32", reduce_op="sum", root=-1, ended_ago=None):
    ended = DUMPED_AT - ended_ago if ended_ago is not None else (
        None if state != "completed" else DUMPED_AT - 9)
    return {"id": seq, "op": name, "seq": seq, "count": count, "dtype": dtype,
            "reduce_op": reduce_op if name in ("allreduce", "reduce", "reducescatter") else "",
            "root": root, "peer": peer, "algorithm": "ring", "state": state,
            "status": "timeout" if state == "failed" else "", "issued": DUMPED_AT - issued_ago,
            "started": DUMPED_AT - issued_ago, "ended": ended,
            "error": error}


def write_dump(directory, rank, size, ops, job="feedbeef0001", comm="world", reason="timeout",
               dumped_at=DUMPED_AT):
    dump = {"chorus_trace": 1, "job": job, "world_rank": rank, "comm": comm, "comm_rank": rank,
            "comm_size": size, "pid": 100 + rank, "host": "h", "reason": reason,
            "dumped_at": dumped_at, "capacity": 256, "total_ops": len(ops), "ops": ops}
    path = os.path.join(directory, "chorus-trace-%s-%d-%s.json" % (job, rank, comm))
    with open(path, "w") as f:
        json.dump(dump, f)


def run(directory, *extra):
    result = subprocess.run([sys.executable, SCRIPT, "--dir", directory, *extra],
                            capture_output=True, text=True, timeout=20)
    return result.returncode, result.stdout, result.stderr


class Report(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = self.dir.name

    def tearDown(self):
        self.dir.cleanup()

    def test_rank_stuck_in_an_earlier_operation(self):
        # Rank 3 is blocked in a receive issued before allreduce #12; the others wait in #12.
        for r in (0, 1, 2, 4):
            write_dump(self.path, r, 5, [op(11), op(12, state="started", issued_ago=4.2 + r / 10)])
        write_dump(self.path, 3, 5, [op(11), op(0, name="recv", state="started", issued_ago=4.5, peer=1),
                                     op(12, state="issued", issued_ago=4.4)])
        code, out, err = run(self.path)
        self.assertEqual(code, 0, err)
        self.assertIn("rank 3 is stuck in recv #0 (count 4, float32, peer 1) (issued 4.5 s before its dump)", out)
        self.assertIn("ranks 0-2,4 wait in allreduce #12 (count 4, float32, sum) "
                      "(issued 4.2 s to 4.6 s before their dumps) for rank 3", out)

    def test_rank_that_never_arrived_and_left_a_dump(self):
        write_dump(self.path, 0, 3, [op(1, "barrier"), op(2, state="failed", issued_ago=1.0,
                                                          error="allreduce #2 timed out: rank 2 never reached it")])
        write_dump(self.path, 1, 3, [op(1, "barrier"), op(2, state="failed", issued_ago=1.0)])
        write_dump(self.path, 2, 3, [op(1, "barrier")])
        code, out, _ = run(self.path)
        self.assertEqual(code, 0)
        self.assertIn("rank 2 never reached allreduce #2 (count 4, float32, sum) (last completed barrier #1)", out)
        self.assertIn("ranks 0-1 wait in allreduce #2 (count 4, float32, sum) (issued 1.0 s before their dumps) "
                      "for rank 2", out)

    def test_missing_dump_named_by_the_timeout_sentences(self):
        error = "allreduce #3 (count 4, float32, sum) timed out after 1.0s: rank 2 never reached it (rank 2 last seen in allreduce #2)"
        for r in (0, 1):
            write_dump(self.path, r, 3, [op(1, "barrier"), op(2), op(3, state="failed", issued_ago=1.0,
                                                                        error=error if r == 0 else "rank 0 aborted: " + error)])
        code, out, _ = run(self.path)
        self.assertEqual(code, 0)
        self.assertIn("communicator world: 3 ranks, dumps from ranks 0-1; none from rank 2 (timeout)", out)
        self.assertIn("rank 2 never reached allreduce #3 (count 4, float32, sum) (no dump from it; ranks 0-1 say so)", out)
        self.assertIn("ranks 0-1 wait in allreduce #3 (count 4, float32, sum)", out)

    def test_rank_that_arrived_after_the_others_gave_up(self):
        # Ranks 0-1 waited 3 s in barrier #2 and timed out; rank 2 issued it 3.0 s after them
        # and failed at once on their abort. Every rank has the call, none completed it.
        timeout = ("barrier #2 timed out after 3.0s: rank 2 never reached it (rank 2 last seen "
                   "in barrier #1); waiting for rank(s) 2 (recv of 1 bytes for barrier #2)")
        aborted = "rank 0 aborted: " + timeout
        for r, issued_ago, ended_ago, error in ((0, 3.5, 0.5, timeout), (1, 3.4, 0.5, aborted),
                                                 (2, 0.4, 0.4, aborted)):
            barrier = op(2, "barrier", state="failed", issued_ago=issued_ago,
                         ended_ago=ended_ago, error=error)
            write_dump(self.path, r, 3, [op(1, "barrier"), barrier],
                       reason="timeout" if r == 0 else "remote error")
        code, out, err = run(self.path)
        self.assertEqual(code, 0, err)
        self.assertIn("rank 2 issued barrier #2 3.0 s to 3.1 s after ranks 0-1, "
                      "past their 3.0 s timeout", out)
        self.assertIn("ranks 0-1 wait in barrier #2 (issued 3.4 s to 3.5 s before their dumps) "
                      "for rank 2", out)
        self.assertNotIn("none completed it", out)

    def test_late_rank_without_a_timeout_sentence(self):
        # Dumps on a remote error, no timeout sentence: the end of rank 0's failed wait is the
        # moment it gave up, and rank 1 issued the call after it.
        write_dump(self.path, 0, 2, [op(3, state="failed", issued_ago=5.0, ended_ago=2.0,
                                        error="rank 1 (pid 101) died")])
        write_dump(self.path, 1, 2, [op(3, state="failed", issued_ago=1.0, ended_ago=1.0,
                                        error="rank 0 aborted: rank 1 (pid 101) died")])
        code, out, err = run(self.path)
        self.assertEqual(code, 0, err)
        self.assertIn("rank 1 issued allreduce #3 (count 4, float32, sum) 4.0 s after rank 0, "
                      "after its wait for it had already failed", out)

    def test_slow_rank_within_the_timeout_is_not_blamed(self):
        # Rank 2 came 1 s late but nobody had given up on it yet (a SIGUSR1 dump).
        for r, ago in ((0, 4.0), (1, 4.0), (2, 3.0)):
            write_dump(self.path, r, 3, [op(1, "barrier"), op(2, state="started", issued_ago=ago)],
                       reason="SIGUSR1")
        code, out, err = run(self.path)
        self.assertEqual(code, 0, err)
        self.assertNotIn(" issued allreduce", out)
        self.assertIn("every rank reached allreduce #2 (count 4, float32, sum) and none "
                      "completed it", out)

    def test_first_disagreement(self):
        write_dump(self.path, 0, 2, [op(1), op(2, state="failed", issued_ago=0.2)], reason="mismatch")
        write_dump(self.path, 1, 2, [op(1), op(2, "broadcast", state="failed", issued_ago=0.2, root=0)],
                   reason="mismatch")
        code, out, _ = run(self.path)
        self.assertEqual(code, 0)
        self.assertIn("mismatch at #2: rank 0 in allreduce #2 (count 4, float32, sum); "
                      "rank 1 in broadcast #2 (count 4, float32, root 0)", out)
        self.assertNotIn("wait in", out)

    def test_everything_completed(self):
        for r in range(2):
            write_dump(self.path, r, 2, [op(1), op(2)], reason="SIGUSR1")
        code, out, _ = run(self.path)
        self.assertEqual(code, 0)
        self.assertIn("every dumped rank completed everything it issued", out)
        self.assertIn("rank 0: last completed allreduce #2 (count 4, float32, sum); nothing pending", out)

    def test_newest_job_unless_one_is_named(self):
        write_dump(self.path, 0, 1, [op(1)], job="old000000000", dumped_at=DUMPED_AT - 100)
        write_dump(self.path, 0, 1, [op(7)], job="new000000000")
        code, out, _ = run(self.path)
        self.assertIn("job new000000000 (1 other job(s) in the same place; --job chooses)", out)
        self.assertIn("allreduce #7", out)
        code, out, _ = run(self.path, "--job", "old000000000")
        self.assertEqual(code, 0)
        self.assertIn("allreduce #1", out)
        code, _, err = run(self.path, "--job", "nosuchjob")
        self.assertEqual(code, 1)
        self.assertIn("no dumps of job nosuchjob", err)

    def test_no_dumps(self):
        code, _, err = run(self.path)
        self.assertEqual(code, 1)
        self.assertIn("no flight-recorder dumps found", err)


if __name__ == "__main__":
    unittest.main()
