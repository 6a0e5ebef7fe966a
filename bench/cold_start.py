"""Wall-clock time of `arroyo run` on a small bounded query, from a cold process to exit.

.venv/bin/python bench/cold_start.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERY = """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', message_count = '1000',
                           event_time_interval = '10 milliseconds');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink');
INSERT INTO out SELECT tumble(interval '1 second') AS window, count(*) AS c FROM impulse
GROUP BY window;
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            query = Path(tmp) / "q.sql"
            query.write_text(QUERY.format(out=Path(tmp) / "out.json"))
            started = time.monotonic()
            subprocess.run(
                [sys.executable, "-m", "arroyo.cli.main", "run", str(query)],
                check=True,
                capture_output=True,
            )
            times.append(time.monotonic() - started)
            rows = (Path(tmp) / "out.json").read_text().count("\n")
    print(
        f"arroyo run, small bounded query ({rows} windows), cold: "
        f"median {statistics.median(times):.1f} s, min {min(times):.1f} s, "
        f"runs {', '.join(f'{t:.1f}' for t in times)}"
    )


if __name__ == "__main__":
    main()
