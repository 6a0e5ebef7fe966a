"""Secret options out of compiled programs: workers fetch them, they never travel in a program.

An option a connector marks secret (``Field(..., json_schema_extra=SECRET)``: a password, a
token, a key) is taken out of each table of a compiled program (``take``) and replaced by a
reference, ``${secret:<table>.<option>}``. The values travel beside the program, in its
``secrets``, only as far as the store, which seals them at rest with the rest of the program
(``arroyo.store.secrets``). The controller keeps them out of the program it sends to a node
and a worker; the worker asks the controller for its job's values over the services' channel
(``GetJobSecrets``) and puts them back in memory (``put``), and the copy of the program a
run writes to its state directory is the one with references.

A value written into a query's own text is taken out of the program the same way, but the
query's text keeps it: name a connection profile instead (``connection_profile = 'name'``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Mapping

from arroyo.connectors import connector
from arroyo.connectors.base import secret_fields
from arroyo.errors import ArroyoError, ErrorDomain
from arroyo.program.spec import PipelineProgram, TableSpec

_REFERENCE = re.compile(r"^\$\{secret:(?P<key>[^}]+)\}$")


class MissingSecretError(ArroyoError):
    """A program refers to a secret its job does not have."""

    code = "missing_secret"
    domain = ErrorDomain.INTERNAL


def reference(key: str) -> str:
    return f"${{secret:{key}}}"


def _tables(program: PipelineProgram) -> Iterator[TableSpec]:
    yield from program.sources
    for query in program.queries:
        yield query.sink


def _secret_options(table: TableSpec) -> frozenset[str]:
    conn = connector(table.connector)
    if conn is None:
        return frozenset()
    names = secret_fields(conn.options_model)
    if conn.connection_model is not None:
        names |= secret_fields(conn.connection_model)
    return names


def take(program: PipelineProgram) -> PipelineProgram:
    """``program`` with each secret option's value replaced by its reference, and the values
    in its ``secrets``, by reference key."""
    values = dict(program.secrets)
    replaced: dict[int, TableSpec] = {}
    for table in _tables(program):
        options = dict(table.options)
        for name in _secret_options(table) & options.keys():
            value = options[name]
            if isinstance(value, str) and not _REFERENCE.match(value):
                key = f"{table.name}.{name}"
                values[key] = value
                options[name] = reference(key)
        if options != table.options:
            replaced[id(table)] = dataclasses.replace(table, options=options)
    return _with_tables(program, replaced, values)


def without(program: PipelineProgram) -> PipelineProgram:
    """The program a node and a worker get: references, no values."""
    return dataclasses.replace(program, secrets={})


def wanted(program: PipelineProgram) -> set[str]:
    """The keys of the secrets the program refers to."""
    return {
        match["key"]
        for table in _tables(program)
        for value in table.options.values()
        if isinstance(value, str) and (match := _REFERENCE.match(value))
    }


def put(program: PipelineProgram, values: Mapping[str, str]) -> PipelineProgram:
    """The program with each reference replaced by its value; ``MissingSecretError`` names a
    reference with none."""
    replaced: dict[int, TableSpec] = {}
    for table in _tables(program):
        options = dict(table.options)
        for name, value in table.options.items():
            match = _REFERENCE.match(value) if isinstance(value, str) else None
            if match is None:
                continue
            if match["key"] not in values:
                raise MissingSecretError(
                    f"table '{table.name}' refers to secret '{match['key']}' for its option "
                    f"'{name}', which the job does not have"
                )
            options[name] = values[match["key"]]
        if options != table.options:
            replaced[id(table)] = dataclasses.replace(table, options=options)
    return _with_tables(program, replaced, program.secrets)


def _with_tables(
    program: PipelineProgram, replaced: dict[int, TableSpec], secrets: Mapping[str, str]
) -> PipelineProgram:
    return dataclasses.replace(
        program,
        sources=[replaced.get(id(t), t) for t in program.sources],
        queries=[
            dataclasses.replace(q, sink=replaced[id(q.sink)]) if id(q.sink) in replaced else q
            for q in program.queries
        ],
        secrets=dict(secrets),
    )
