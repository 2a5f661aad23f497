"""busbw-vs-size charts as hand-written SVG (standard library only): log-log axes,
one colour per peer, one dash pattern per rank count.

Charts are not committed: they are drawn from the markdown reports in bench/results,

    python3 bench/charts.py bench/results/<stamp>.md [more reports] [--out DIR]

which writes DIR/<stamp>-<collective>.svg (default DIR: build/charts; a PNG beside each when
rsvg-convert from librsvg2-bin is installed)."""
import argparse
import math
import pathlib
import re
import shutil
import subprocess
import sys

import runners

COLOURS = {"chorus": "#d62728", "ompi": "#1f77b4", "gloo": "#2ca02c"}
DASHES = ["", "6,3", "2,3", "8,3,2,3"]
WIDTH, HEIGHT = 760, 460
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 40, 50


def size_label(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


def decades(low, high):
    return list(range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1))


def series(coll, ranks, peers, data):
    """[(peer, n, [(size, busbw)...])] with only positive points (log axes)."""
    out = []
    for n in ranks:
        for peer in peers:
            times = sorted(data.get((coll, n, peer), {}).items())
            pts = [(s, runners.busbw(coll, n, s, t)) for s, t in times]
            pts = [(s, b) for s, b in pts if s > 0 and b and b > 0]
            if pts:
                out.append((peer, n, pts))
    return out


def busbw_chart(coll, ranks, peers, data):
    """SVG text; data[(coll, n, peer)] = {size: median seconds}."""
    lines = series(coll, ranks, peers, data)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="22" text-anchor="middle" font-size="15">'
           f'{coll}: bus bandwidth vs size (median)</text>']
    if not lines:
        svg.append(f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">no data</text>')
        return "\n".join(svg + ["</svg>"]) + "\n"
    sizes = [s for _, _, pts in lines for s, _ in pts]
    bws = [b for _, _, pts in lines for _, b in pts]
    xd, yd = decades(min(sizes), max(sizes)), decades(min(bws), max(bws))
    if len(yd) < 2:
        yd = [yd[0], yd[0] + 1]
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(size):
        return LEFT + (math.log10(size) - xd[0]) / (xd[-1] - xd[0]) * pw

    def y(bw):
        return TOP + ph - (math.log10(bw) - yd[0]) / (yd[-1] - yd[0]) * ph

    svg.append(f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    for d in xd:
        px = x(10 ** d)
        svg.append(f'<line x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" y2="{TOP + ph}" stroke="#ddd"/>')
        svg.append(f'<text x="{px:.1f}" y="{TOP + ph + 16}" text-anchor="middle">1e{d}</text>')
    for d in yd:
        py = y(10 ** d)
        svg.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{LEFT + pw}" y2="{py:.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">1e{d}</text>')
    svg.append(f'<text x="{LEFT + pw / 2}" y="{HEIGHT - 12}" text-anchor="middle">'
               f'size (bytes)</text>')
    svg.append(f'<text x="18" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 18 {TOP + ph / 2})">busbw (GB/s)</text>')
    for i, (peer, n, pts) in enumerate(lines):
        colour = COLOURS.get(peer, "#000")
        dash = DASHES[ranks.index(n) % len(DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        path = " ".join(f"{x(s):.1f},{y(b):.1f}" for s, b in pts)
        svg.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                   f'stroke-width="2"{dash_attr}/>')
        for s, b in pts:
            svg.append(f'<circle cx="{x(s):.1f}" cy="{y(b):.1f}" r="2.5" fill="{colour}">'
                       f'<title>{peer} n={n} {size_label(s)}: {b:.3f} GB/s</title></circle>')
        ly = TOP + 14 + 18 * i
        lx = LEFT + pw + 12
        svg.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 30}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2"{dash_attr}/>')
        svg.append(f'<text x="{lx + 36}" y="{ly + 4}">{peer}, {n} ranks</text>')
    svg.append("</svg>")
    return "\n".join(svg) + "\n"


SECTION = re.compile(r"^### (\w+), (\d+) ranks?$")
TIME_COLUMN = re.compile(r"^(\w+) time \(us\)$")


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_report(text):
    """The tables of a compare.py report: (ranks, peers, data) with
    data[(coll, n, peer)] = {size: seconds}, in the order the report shows them."""
    ranks, peers, data = [], [], {}
    section, columns = None, None
    for line in text.splitlines():
        match = SECTION.match(line.strip())
        if match:
            section, columns = (match.group(1), int(match.group(2))), None
            if section[1] not in ranks:
                ranks.append(section[1])
            continue
        if section is None or not line.startswith("|"):
            continue
        row = cells(line)
        if columns is None:
            columns = {i: m.group(1) for i, c in enumerate(row) if (m := TIME_COLUMN.match(c))}
            for peer in columns.values():
                if peer not in peers:
                    peers.append(peer)
            continue
        if not row[0].isdigit():
            continue  # the alignment row
        for i, peer in columns.items():
            by_size = data.setdefault((section[0], section[1], peer), {})
            try:
                by_size[int(row[0])] = float(row[i]) * 1e-6
            except ValueError:
                pass  # a cell the peer did not run ("-")
    return ranks, peers, data


def write_charts(report, out):
    """Draws one chart per collective of the report `report` into `out`; returns the paths."""
    ranks, peers, data = read_report(pathlib.Path(report).read_text())
    collectives = list(dict.fromkeys(coll for coll, _, _ in data))
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for coll in collectives:
        svg = out / f"{pathlib.Path(report).stem}-{coll}.svg"
        svg.write_text(busbw_chart(coll, ranks, peers, data))
        written.append(svg)
        if shutil.which("rsvg-convert"):
            subprocess.run(["rsvg-convert", str(svg), "-o", str(svg.with_suffix(".png"))],
                           check=False)
    return written


def main(argv):
    p = argparse.ArgumentParser(description="Draw the busbw charts of compare.py reports.")
    p.add_argument("reports", nargs="+", help="bench/results/<stamp>.md files")
    p.add_argument("--out", default="build/charts", help="directory for the charts")
    a = p.parse_args(argv)
    for report in a.reports:
        written = write_charts(report, a.out)
        if not written:
            print(f"{report}: no compare.py tables found", file=sys.stderr)
            return 1
        for path in written:
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
