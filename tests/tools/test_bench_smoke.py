"""The benchmark harness runs end to end and prints figures for two always-present peers.

This checks that ``tools/bench.py`` keeps working; it asserts no speed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench.py"
PEERS = ("raw-lmdb", "sqlite-wal")


def _first_figure(line: str) -> float:
    """Return the first number after the peer name on a table row."""
    token = line.split()[1]
    return float(token.replace(",", ""))


def test_quick_run_prints_positive_figures_for_raw_lmdb_and_sqlite_wal(tmp_path: Path) -> None:
    """`bench.py --quick --only raw-lmdb,sqlite-wal` prints a positive figure on every row."""
    result = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--only", ",".join(PEERS), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    rows = {name: [ln for ln in lines if ln.startswith(name + " ")] for name in PEERS}
    for name, found in rows.items():
        # Two append tables (1 and 8 writers), the read table and (raw-lmdb) the large store.
        assert len(found) >= 3, f"{name}: rows missing from\n{result.stdout}"
        for line in found:
            assert _first_figure(line) > 0, f"{name}: no positive figure in {line!r}"
    assert list(tmp_path.iterdir()) == [], "the run left data behind"
