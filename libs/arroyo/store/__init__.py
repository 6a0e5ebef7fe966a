"""The control plane's database: SQLite by default, PostgreSQL through asyncpg."""

from pathlib import Path

from arroyo.store.errors import Conflict, DatabaseUrlError, LeaseLost, NotFound, StoreError
from arroyo.store.model import (
    ApiKey,
    ApiKeyId,
    Checkpoint,
    ConnectionProfile,
    ConnectionProfileId,
    ConnectionTable,
    ConnectionTableId,
    Job,
    JobConfig,
    JobError,
    JobId,
    JobState,
    JobStatus,
    Lease,
    Pipeline,
    PipelineId,
    SavedUdf,
    StopMode,
    Store,
    UdfId,
)
from arroyo.store.secrets import SecretBox

__all__ = [
    "ApiKey",
    "ApiKeyId",
    "Checkpoint",
    "Conflict",
    "ConnectionProfile",
    "ConnectionProfileId",
    "ConnectionTable",
    "ConnectionTableId",
    "DatabaseUrlError",
    "Job",
    "JobConfig",
    "JobError",
    "JobId",
    "JobState",
    "JobStatus",
    "Lease",
    "LeaseLost",
    "NotFound",
    "Pipeline",
    "PipelineId",
    "SavedUdf",
    "StopMode",
    "Store",
    "StoreError",
    "UdfId",
    "open_store",
]


async def open_store(url: str, secrets: SecretBox | None = None) -> Store:
    """The store for a database URL, connected but not migrated (call ``migrate()``).

    ``sqlite:///path/to/file.db`` (``sqlite:////abs/path.db`` for an absolute path, as
    ``Config.database_url()`` writes it; a relative one is taken from the working directory)
    or ``postgresql://user:password@host:port/db`` (``postgres://`` too). With ``secrets``,
    the columns that hold secrets are encrypted with it (``arroyo.store.secrets``); without, a
    value found encrypted is refused.
    """
    scheme, sep, _ = url.partition("://")
    if url.startswith("sqlite:///"):
        from arroyo.store.sqlite import SqliteStore

        sqlite = await SqliteStore.open(Path(url.removeprefix("sqlite:///")).absolute())
        sqlite._box = secrets
        return sqlite
    if scheme in ("postgresql", "postgres"):
        # Imported here: a SQLite deployment need not load asyncpg.
        from arroyo.store.postgres import PostgresStore

        postgres = await PostgresStore.open(url)
        postgres._box = secrets
        return postgres
    # Only the scheme in the message: the rest of a URL may hold a password.
    what = f"scheme {scheme}://" if sep else "no scheme"
    raise DatabaseUrlError(
        f"unsupported database URL ({what}): use sqlite:///path/to/file.db "
        "or postgresql://user@host/db"
    )
