"""A pipeline's state in an object store (``arroyo run --state-dir s3://bucket/prefix``, a
cluster's ``checkpoint_url``), so that a pipeline stopped on one machine resumes on another
that shares no disk with it.

Each part of the state is kept where its guarantees hold:

- Spark's checkpoints (offset and commit logs, state stores) are written by Spark itself,
  through S3A, under ``<url>/queries/<query>/checkpoint``: a batch's offsets are durable before
  it runs and its commit after, as on a disk.
- Arroyo's own state (a sink's id and its last committed batch, a source's start time, the
  stages between a pipeline's queries, an updating sink's changelog) lives in a local working
  directory and is written through to ``<url>``: ``durable(path)`` uploads a file (or
  directory) before the write that made it returns, so the object store never lags a decision
  taken from it. A run first restores that state from ``<url>``, on whatever machine it runs.

Readers are the same code on either: connectors read and write their state under a local
``Path`` and call ``durable``/``forget`` after each change, which do nothing for a state
that is only local."""

from __future__ import annotations

import json
import os
import posixpath
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

from arroyo.connectors.storage import Location, StorageError, parse_location
from arroyo.errors import ArroyoError, ErrorDomain

# Spark's own part of a pipeline's state: never mirrored, Spark writes it to the store itself.
_SPARK_PART = "checkpoint"
# In a directory being stored, until its last file is: a directory that still has it after a
# crash was never durable (its writer had not gone on), and is not restored.
_INCOMPLETE = "_arroyo_incomplete"

_lock = threading.Lock()
_attached: dict[Path, RemoteState] = {}
# States attached in another process of the pipeline, found by their mark.
_found: dict[Path, RemoteState] = {}
_MARK = ".arroyo-remote-state.json"


class RemoteStateError(ArroyoError):
    """A state location that cannot be used (not an object store, unreachable, refused)."""

    code = "state_location"
    domain = ErrorDomain.USER


class RemoteState:
    """The object-store copy of one pipeline's state at ``url``, worked on in ``local``.

    Credentials and endpoint: ``storage_options`` (a table's ``storage.*`` keys), by default
    the ``AWS_*`` environment variables as Arroyo reads them (``AWS_ACCESS_KEY_ID``,
    ``AWS_ENDPOINT``, ``AWS_DEFAULT_REGION``...), or the endpoint in an
    ``s3::http://host:port/bucket/prefix`` URL."""

    def __init__(
        self, url: str, local: Path, storage_options: dict[str, str] | None = None
    ) -> None:
        from arroyo.connectors.filesystem.store import SinkStore

        options = storage_options if storage_options is not None else environment_options()
        self.options = options
        try:
            self.location: Location = parse_location(url, options)
        except StorageError as err:
            raise RemoteStateError(f"state location '{url}': {err}") from err
        if self.location.local:
            raise RemoteStateError(f"state location '{url}' is a local path, not an object store")
        if not self.location.key.strip("/"):
            raise RemoteStateError(
                f"state location '{url}' is a whole bucket: give a prefix (s3://bucket/prefix)"
            )
        self.url = url
        self.local = Path(os.path.abspath(local))
        try:
            self.store = SinkStore(self.location)
        except ArroyoError as err:
            raise RemoteStateError(f"state location '{url}': {err.message}") from err

    def checkpoint_uri(self, relative: str) -> str:
        """Where Spark writes the checkpoint at ``relative`` (S3A's URI)."""
        return self.location.join(relative)

    @staticmethod
    def checkpoint_key(uri: str) -> str:
        """A checkpoint URI as Spark's state stores name their root (its path alone)."""
        return urlsplit(uri).path

    def restore(self) -> None:
        """Bring the stored state into the local directory (overwriting what is there), then
        store what only the local directory has (written while the pipeline was planned)."""
        with self._naming("restore the pipeline's state from"):
            self._check_bucket()
            stored = [f for f in self.store.files() if not _spark_part(f)]
            incomplete = {
                posixpath.dirname(f) for f in stored if posixpath.basename(f) == _INCOMPLETE
            }
            for directory in sorted(incomplete):
                self.store.delete_dir(directory)
            stored = [f for f in stored if not _under_any(f, incomplete)]
            for relative in stored:
                target = self.local / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                partial = target.with_name(f".{target.name}.restoring")
                with self.store.read(relative) as src, open(partial, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                os.replace(partial, target)
            known = set(stored)
            for path in sorted(p for p in self.local.rglob("*") if p.is_file()):
                relative = path.relative_to(self.local).as_posix()
                if relative not in known and not _spark_part(relative):
                    self._upload(path, relative)

    def _check_bucket(self) -> None:
        from pyarrow import fs as pafs

        if not self.location.bucket:
            return
        info = self.store.fs.get_file_info(self.location.bucket)
        if info.type == pafs.FileType.NotFound:
            raise RemoteStateError(
                f"cannot keep the pipeline's state in {self.location.describe()}: "
                "the bucket does not exist"
            )

    def clear(self) -> None:
        """Remove the stored state: a run starting from nothing must not resume from it."""
        with self._naming("clear the pipeline's state in"):
            self._check_bucket()
            self.store.delete_dir("")

    def push(self, path: Path) -> None:
        with self._naming("store the pipeline's state in"):
            self._push(path)

    def _push(self, path: Path) -> None:
        relative = path.relative_to(self.local).as_posix()
        if path.is_dir():
            # Object stores have no atomic directories: marked incomplete until whole.
            marker = posixpath.join(relative, _INCOMPLETE)
            with self.store.write(marker):
                pass
            for child in sorted(p for p in path.rglob("*") if p.is_file()):
                self._upload(child, child.relative_to(self.local).as_posix())
            self.store.delete(marker)
        elif path.exists():
            self._upload(path, relative)
        else:
            self.delete(path)

    def delete(self, path: Path) -> None:
        relative = path.relative_to(self.local).as_posix()
        with self._naming(f"remove '{relative}' of the pipeline's state in"):
            self.store.delete(relative)
            self.store.delete_dir(relative)

    @contextmanager
    def _naming(self, what: str) -> Iterator[None]:
        """The store's errors as RemoteStateError, naming the bucket and the endpoint."""
        try:
            yield
        except OSError as err:
            raise RemoteStateError(f"cannot {what} {self.location.describe()}: {err}") from err

    def _upload(self, path: Path, relative: str) -> None:
        if _hidden(relative):
            return
        with open(path, "rb") as src, self.store.write(relative) as dst:
            shutil.copyfileobj(src, dst)


# The environment's AWS_* variables, as Arroyo's object store reads them for its checkpoints.
_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "aws_access_key_id",
    "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
    "AWS_SESSION_TOKEN": "aws_session_token",
    "AWS_DEFAULT_REGION": "aws_region",
    "AWS_REGION": "aws_region",
    "AWS_ENDPOINT": "aws_endpoint",
    "AWS_ENDPOINT_URL": "aws_endpoint",
    "AWS_ALLOW_HTTP": "aws_allow_http",
}


def environment_options() -> dict[str, str]:
    """Storage options from the environment: passed on explicitly, so that Spark's JVM (whose
    environment is its own) reaches the store with the same ones."""
    return {key: os.environ[var] for var, key in _ENVIRONMENT.items() if os.environ.get(var)}


def _spark_part(relative: str) -> bool:
    """Under ``queries/<query>/checkpoint/``: Spark's own, which Spark stores itself."""
    parts = relative.split("/")
    return len(parts) > 3 and parts[0] == "queries" and parts[2] == _SPARK_PART


def _under_any(relative: str, directories: set[str]) -> bool:
    return any(relative.startswith(d + "/") for d in directories)


def _hidden(relative: str) -> bool:
    """Files being written (``.x.tmp``, ``.tmp-3/``): only what they become is state."""
    return any(part.startswith(".") for part in relative.split("/"))


def is_remote(location: str) -> bool:
    """Whether a state location names an object store (not a local path)."""
    if location.startswith("file:"):
        return False
    return "://" in location or location.lower().startswith("s3::")


def attach(remote: RemoteState) -> None:
    """Write the state under ``remote.local`` through to ``remote`` from now on, in this
    process and in the processes Spark starts for our Python data sources (a stage reader
    removes the batches it consumed from its own): they find it by a mark in the directory,
    readable by its owner alone (it holds the store's credentials), never stored."""
    with _lock:
        _attached[remote.local] = remote
    remote.local.mkdir(parents=True, exist_ok=True)
    mark = remote.local / _MARK
    partial = mark.with_name(f"{_MARK}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": remote.url, "options": remote.options}, f)
    os.replace(partial, mark)


def detach(remote: RemoteState) -> None:
    with _lock:
        if _attached.get(remote.local) is remote:
            del _attached[remote.local]
    (remote.local / _MARK).unlink(missing_ok=True)


def _owner(path: Path) -> RemoteState | None:
    absolute = Path(os.path.abspath(path))
    with _lock:
        for root, remote in _attached.items():
            if absolute == root or root in absolute.parents:
                return remote
    for root in (absolute, *absolute.parents):
        if (root / _MARK).is_file():
            return _marked(root)
    return None


def _marked(root: Path) -> RemoteState | None:
    """The state attached at ``root`` in another process (its mark), kept for this one."""
    try:
        mark = json.loads((root / _MARK).read_text())
    except (OSError, ValueError):
        return None  # detached meanwhile
    with _lock:
        known = _found.get(root)
        if known is None or known.url != mark["url"]:
            known = _found[root] = RemoteState(mark["url"], root, mark["options"])
        return known


def durable(path: Path) -> None:
    """``path`` (a file or directory of the state) was written: store it now."""
    remote = _owner(path)
    if remote is not None:
        remote.push(Path(os.path.abspath(path)))


def write_durably(path: Path, text: str) -> None:
    """Replaces ``path`` of the state with ``text`` at once (a reader sees the old text or the
    new, never part of it), and stores it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    durable(path)


def forget(path: Path) -> None:
    """``path`` was removed from the state: remove it from the store too."""
    remote = _owner(path)
    if remote is not None:
        remote.delete(Path(os.path.abspath(path)))


def stored_uri(path: Path) -> str | None:
    """The URI (S3A's) that ``path`` of the state is written through to, or None when the
    state is only local: for a writer in the JVM, which stores its files there itself."""
    absolute = Path(os.path.abspath(path))
    remote = _owner(absolute)
    if remote is None:
        return None
    relative = absolute.relative_to(remote.local).as_posix()
    return remote.location.join(relative) if relative != "." else remote.location.uri


def identity(state_dir: Path) -> str:
    """What names this state across machines: its object-store URL and place in it when
    stored, else its absolute local path."""
    stored = stored_uri(state_dir)
    return stored if stored is not None else str(Path(os.path.abspath(state_dir)).resolve())
