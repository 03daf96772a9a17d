#!/usr/bin/env python3
"""Draws the bench's results (target/bench-results.json, written by scripts/bench.sh) as
one SVG: per target, the median latency of a `tools/call echo` at 1 call in flight and
the calls per second with many in flight, stdio and HTTP side by side. No dependencies
beyond Python's standard library.

    python3 scripts/plot.py [RESULTS.json] [--out docs/bench.svg]

scripts/bench.sh runs it after every bench run, so the README's plot is redrawn whenever
the bench is run with the sections it shows (`--only calls`, `--only http`, or all)."""

import argparse
import json
import subprocess
import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What each bench target is, in words a reader of the README knows; in this order.
LABELS = {
    "rows": [
        ("direct", "server alone, stdio"),
        ("direct-sdk-io", "server alone, stdio (SDK-style I/O)"),
        ("gateway", "wasmgate → server, stdio"),
        ("wasm", "wasmgate → WASM plugin, stdio"),
    ],
    "http_rows": [
        ("floor", "minimal HTTP echo server alone"),
        ("http-server", "wasmgate → server, HTTP"),
        ("http-wasm", "wasmgate → WASM plugin, HTTP"),
        ("http-wasm-shared", "wasmgate → WASM plugin (shared instance), HTTP"),
        ("mcp-proxy", "mcp-proxy (crates.io) → server, HTTP"),
    ],
}

# The HTTP section's own stdio baselines (measured at 1 in flight only): the stdio rows
# above show those paths.
OMITTED = {"stdio-server", "stdio-wasm"}

WIDTH = 940
BAR_LEFT = 360
BAR_RIGHT = WIDTH - 110
ROW = 24
COLOURS = {"rows": "#3b6ea8", "http_rows": "#c2692a"}


def rows_of(results: dict, section: str) -> list[tuple[str, float | None, float | None, int]]:
    """(label, p50 µs at 1 in flight, calls/s at the most in flight, that many) per target."""
    rows = results.get(section) or []
    out = []
    known = [name for name, _ in LABELS[section]]
    targets = known + sorted({r["target"] for r in rows} - set(known) - OMITTED)
    for target in targets:
        mine = [r for r in rows if r["target"] == target]
        if not mine:
            continue
        at_1 = next((r["p50_us"] for r in mine if r["inflight"] == 1), None)
        most = max(mine, key=lambda r: r["inflight"])
        label = dict(LABELS[section]).get(target, target)
        rate = most["calls_per_s"] if most["inflight"] > 1 else None
        out.append((label, at_1, rate, most["inflight"]))
    return out


def panel(
    title: str, top: int, series: list[tuple[str, str, float | None]], unit: str, digits: int
) -> tuple[list[str], int]:
    """Horizontal bars, one per (section, label, value); returns SVG parts and the next y."""
    parts = [f'<text x="20" y="{top}" class="title">{escape(title)}</text>']
    values = [v for _, _, v in series if v is not None]
    if not values:
        return parts, top + ROW
    scale = (BAR_RIGHT - BAR_LEFT) / max(values)
    y = top + 14
    for section, label, value in series:
        parts.append(f'<text x="{BAR_LEFT - 8}" y="{y + 15}" class="label">{escape(label)}</text>')
        if value is None:
            parts.append(f'<text x="{BAR_LEFT}" y="{y + 15}" class="value">not measured</text>')
        else:
            width = max(1.0, value * scale)
            parts.append(
                f'<rect x="{BAR_LEFT}" y="{y + 3}" width="{width:.1f}" height="{ROW - 8}" '
                f'fill="{COLOURS[section]}" rx="2"/>'
            )
            parts.append(
                f'<text x="{BAR_LEFT + width + 6:.1f}" y="{y + 15}" class="value">{value:,.{digits}f} {unit}</text>'
            )
        y += ROW
    return parts, y + 22


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def draw(results: dict) -> str | None:
    """The SVG; `None` when the results have neither section (another section was run)."""
    latency, rate = [], []
    in_flight = {}
    for section in ("rows", "http_rows"):
        for label, at_1, calls_per_s, most in rows_of(results, section):
            latency.append((section, label, at_1))
            rate.append((section, label, calls_per_s))
            in_flight[section] = max(most, in_flight.get(section, 0))
    if not latency:
        return None
    machine = results.get("machine", {})
    spin = "spin loops on" if machine.get("spin_loops") else "no spin loops"
    many = " / ".join(f"{n} ({'stdio' if s == 'rows' else 'HTTP'})" for s, n in in_flight.items())
    parts, y = panel("Median latency of tools/call echo, 1 call in flight (µs, lower is better)", 56, latency, "µs", 1)
    more, y = panel(f"Calls per second, {many} in flight (higher is better)", y + 8, rate, "/s", 0)
    parts += more
    note = (
        f"scripts/bench.sh at {commit()}, {machine.get('cores', '?')} cores, {spin}; "
        "redraw: bash scripts/bench.sh --only calls --only http"
    )
    height = y + 10
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="system-ui, sans-serif">'
        "<style>.title{font-size:15px;font-weight:600}.label{font-size:12.5px;text-anchor:end}"
        ".value{font-size:12px;fill:#333}.note{font-size:11px;fill:#666}</style>"
        f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>'
        f'<text x="20" y="24" class="note">{escape(note)}</text>'
    )
    return head + "".join(parts) + "</svg>\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default=str(ROOT / "target/bench-results.json"))
    parser.add_argument("--out", default=str(ROOT / "docs/bench.svg"))
    args = parser.parse_args()
    try:
        results = json.loads(Path(args.results).read_text())
    except (OSError, ValueError) as error:
        print(f"plot.py: {args.results}: {error}", file=sys.stderr)
        return 1
    svg = draw(results)
    if svg is None:
        print("plot.py: no calls or http rows in the results: plot not redrawn", file=sys.stderr)
        return 0
    Path(args.out).write_text(svg)
    print(f"plot written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
