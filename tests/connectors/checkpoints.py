"""Checkpoints as a crash leaves them, for the tests that replay a batch."""

from __future__ import annotations

from pathlib import Path


def query_checkpoint(state: Path) -> Path:
    """The checkpoint of the one query of the pipeline whose state is ``state``."""
    [checkpoint] = (state / "queries").glob("*/checkpoint")
    return checkpoint


def committed_batches(checkpoint: Path) -> list[int]:
    return sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))


def forget_commit(checkpoint: Path, batch: int) -> None:
    """Leave the checkpoint as a crash after the sink wrote ``batch`` and before Spark recorded
    its commit would: that commit is gone, and so is every batch Spark planned or ran after it.
    The batch is replayed on restart."""
    for log in ("commits", "offsets"):
        for path in (checkpoint / log).glob("[0-9]*"):
            if int(path.name) > batch or (log == "commits" and int(path.name) == batch):
                path.unlink()
                path.with_name(f".{path.name}.crc").unlink(missing_ok=True)
