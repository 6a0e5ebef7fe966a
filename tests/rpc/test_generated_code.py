"""Generated gRPC code is never edited by hand: it must be what scripts/gen-proto emits."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_generated_grpc_code_matches_the_protos() -> None:
    result = subprocess.run(
        [str(ROOT / "scripts" / "gen-proto"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
