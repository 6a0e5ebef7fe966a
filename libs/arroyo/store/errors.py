"""What the store raises. Driver errors (sqlite3, asyncpg) never leave it: each backend
translates them to these, raised ``from`` the original."""

from __future__ import annotations

from arroyo.errors import ArroyoError, ErrorDomain


class StoreError(ArroyoError):
    """The database failed an operation: unreachable, locked for too long, out of space.

    Retryable: the database is an external system and most such failures pass.
    """

    code = "store_error"
    domain = ErrorDomain.EXTERNAL
    retryable = True


class NotFound(StoreError):  # noqa: N818 -- the name the Store contract gives it
    """A method that changes a row was given the id of one that does not exist."""

    code = "not_found"
    domain = ErrorDomain.USER
    retryable = False


class Conflict(StoreError):  # noqa: N818 -- named as NotFound is
    """A row with the same key already exists."""

    code = "conflict"
    domain = ErrorDomain.USER
    retryable = False


class DatabaseUrlError(StoreError):
    """The database URL names no engine the store supports."""

    code = "bad_database_url"
    domain = ErrorDomain.USER
    retryable = False


class LeaseLost(StoreError):  # noqa: N818 -- named as NotFound is
    """A write fenced by a lease (``Store.update_job_status``'s ``fence``) from a holder whose
    lease has ended or was taken: it changed nothing."""

    code = "lease_lost"
    domain = ErrorDomain.INTERNAL
    retryable = False
