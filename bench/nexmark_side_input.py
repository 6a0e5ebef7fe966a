"""Nexmark q13's side input: a static table that bids join with (``auction % 10000 = key``),
the same JSON-lines file for every engine of the harness. nexmark-flink ships its own as a
file; ours is written on first use: 10,000 rows ``{"key": k, "value": "side-input-k"}``.

Standard library only: bench/nexmark_flink.py, which runs in PyFlink's virtualenv, imports it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

KEYS = 10_000


def side_input_file() -> Path:
    path = Path.home() / ".cache" / "arroyo" / "nexmark" / "side_input.json"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(
            "".join(json.dumps({"key": k, "value": f"side-input-{k}"}) + "\n" for k in range(KEYS))
        )
        partial.replace(path)
    return path
