"""The image's steps without a container engine (none runs here): scripts/image-check builds
as the Dockerfile's build stage does, with a JDK, then runs a pipeline on a JRE without a
compiler and with nothing to resolve jars from, as a container of the runtime stage would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_pipeline_runs_where_the_image_has_no_jdk(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "image-check"),
            "--workdir",
            str(tmp_path),
            "--keep",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "image-check: the pipeline wrote its 200 rows" in done.stdout
    # The runtime had the jar built by the build stage, and no compiler to make another.
    assert not (tmp_path / "jre" / "bin" / "javac").exists()
    jars = list((tmp_path / "prefix" / "share" / "arroyo" / "java").glob("arroyo-*.jar"))
    assert len(jars) == 1
