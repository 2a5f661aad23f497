"""bench/charts.py draws the busbw charts from a compare.py report's tables: every
(collective, ranks, peer) cell of the report becomes a line with one point per size, and
each point's bus bandwidth follows from the report's time by nccl-tests' factor."""
import os
import pathlib
import re
import sys
import tempfile
import unittest

BENCH = pathlib.Path(os.environ.get("CHORUS_BENCH_DIR",
                                    pathlib.Path(__file__).resolve().parents[2] / "bench"))
sys.path.insert(0, str(BENCH))

import charts  # noqa: E402

REPORT = """# Chorus vs peers

### allreduce, 2 ranks

| size (B) | chorus time (us) | chorus busbw (GB/s) | ompi time (us) | ompi busbw (GB/s) | chorus/ompi | chorus algorithm |
|---:|---:|---:|---:|---:|---:|---:|
| 1024 | 1.00 | 1.024 | 2.00 | 0.512 | 2.00 | shm_direct |
| 4096 | 2.00 | 2.048 | - | - | - | shm_direct |

### allreduce, 4 ranks

| size (B) | chorus time (us) | chorus busbw (GB/s) | ompi time (us) | ompi busbw (GB/s) | chorus/ompi | chorus algorithm |
|---:|---:|---:|---:|---:|---:|---:|
| 1024 | 4.00 | 0.384 | 8.00 | 0.192 | 2.00 | ring |

### gather, 2 ranks

| size (B) | chorus time (us) | chorus busbw (GB/s) | ompi time (us) | ompi busbw (GB/s) | chorus/ompi | chorus algorithm |
|---:|---:|---:|---:|---:|---:|---:|
| 64 | 1.00 | 0.032 | 1.00 | 0.032 | 1.00 | shm_direct |

Charts: `python3 bench/charts.py bench/results/x.md`
"""


class ReadReport(unittest.TestCase):
    def test_every_cell_of_every_table(self):
        ranks, peers, data = charts.read_report(REPORT)
        self.assertEqual(ranks, [2, 4])
        self.assertEqual(peers, ["chorus", "ompi"])
        self.assertEqual(data[("allreduce", 2, "chorus")], {1024: 1e-6, 4096: 2e-6})
        self.assertEqual(data[("allreduce", 2, "ompi")], {1024: 2e-6})  # "-" is no point
        self.assertEqual(data[("allreduce", 4, "ompi")], {1024: 8e-6})
        self.assertEqual(data[("gather", 2, "chorus")], {64: 1e-6})
        self.assertEqual(len(data), 6)

    def test_no_tables(self):
        self.assertEqual(charts.read_report("# nothing here\n"), ([], [], {}))


class WriteCharts(unittest.TestCase):
    def test_one_chart_per_collective_with_the_reports_points(self):
        with tempfile.TemporaryDirectory() as tmp:
            report = pathlib.Path(tmp) / "2026-01-01-000000.md"
            report.write_text(REPORT)
            written = charts.write_charts(report, pathlib.Path(tmp) / "charts")
            self.assertEqual([p.name for p in written],
                             ["2026-01-01-000000-allreduce.svg", "2026-01-01-000000-gather.svg"])
            svg = written[0].read_text()
        self.assertEqual(svg.count("<polyline"), 4)  # chorus and ompi at 2 and 4 ranks
        titles = re.findall(r"<title>([^<]*)</title>", svg)
        # allreduce busbw = size / time * 2(n-1)/n: 1024 B in 1 us at 2 ranks = 1.024 GB/s.
        self.assertIn("chorus n=2 1K: 1.024 GB/s", titles)
        self.assertIn("ompi n=2 1K: 0.512 GB/s", titles)
        self.assertIn("chorus n=4 1K: 0.384 GB/s", titles)
        self.assertEqual(len(titles), 5)

    def test_committed_reports_redraw(self):
        reports = [p for p in sorted((BENCH / "results").glob("*.md"))
                   if "Charts: `python3 bench/charts.py" in p.read_text()]
        self.assertTrue(reports)
        with tempfile.TemporaryDirectory() as tmp:
            for report in reports:
                self.assertTrue(charts.write_charts(report, tmp), report.name)


if __name__ == "__main__":
    unittest.main()
