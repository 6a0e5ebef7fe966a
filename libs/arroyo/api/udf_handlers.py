"""The handlers of saved UDFs (Arroyo's ``/udfs``), mixed into ``arroyo.api.handlers.Api``
(whose store and compiler they use).

A saved UDF is a Python UDF file that defines exactly one UDF. The compiler checks it when it
is saved (its signature, annotations and dependencies block, read without running the file),
and every pipeline compiled later that calls it has it, after the pipeline's own UDFs
(``arroyo.udfs.with_saved``). A pipeline keeps the saved UDFs it was compiled with: deleting
one changes no pipeline that exists."""

from __future__ import annotations

import re

import structlog

from arroyo.api import models as m
from arroyo.api.errors import BadRequestError, InvalidQueryError, ResourceNotFoundError, from_rpc
from arroyo.api.ids import new_id, now_micros
from arroyo.api.routing import Call
from arroyo.rpc import CompilerClient, RpcError
from arroyo.store.errors import NotFound
from arroyo.store.model import SavedUdf, Store, UdfId
from arroyo.udfs import SAVED_MARK
from arroyo_rpc.v1 import common_pb2, compiler_pb2

log = structlog.get_logger(__name__)

# How long the compiler may take to check a UDF file (it reads it; it installs nothing).
VALIDATE_TIMEOUT_S = 120.0
# A UDF diagnostic's message begins with the file and the line: "udfs.py:3: ...".
_AT_LINE = re.compile(r"^[^:\n]+:(\d+): ")


class UdfHandlers:
    """Saved UDFs. Needs ``_store``, ``_compiler`` and ``_compiler_ready``, as ``Api`` sets
    them."""

    _store: Store
    _compiler: CompilerClient

    async def _compiler_ready(self) -> None: ...

    async def validate_udf(self, call: Call[m.ValidateUdfRequest]) -> m.UdfValidation:
        """Check a UDF file without saving it: its UDF's name, or what is wrong and on which
        line. An invalid file is a successful validation (200, with the errors)."""
        return await self._validate(call.input.definition)

    async def create_udf(self, call: Call[m.CreateUdfRequest]) -> m.UdfOut:
        """Save a UDF for every pipeline compiled from now on. The file must define exactly
        one UDF, whose name no saved UDF has (409); an invalid file is a 400 with its
        diagnostics."""
        body = call.input
        if any(line.startswith(SAVED_MARK) for line in body.definition.split("\n")):
            raise BadRequestError(
                f"body.definition: a line begins '{SAVED_MARK.strip()}', which marks where a "
                "saved UDF begins in a pipeline's UDF file; change that comment"
            )
        checked = await self._validate(body.definition)
        if checked.udf_name is None:
            first = checked.errors[0] if checked.errors else "it defines no UDF"
            raise InvalidQueryError(f"the UDF is invalid: {first}", checked.diagnostics)
        now = now_micros()
        udf = SavedUdf(
            id=UdfId(new_id("udf")),
            name=checked.udf_name,
            prefix=body.prefix,
            language=body.language,
            definition=body.definition,
            description=body.description,
            created_at=now,
            updated_at=now,
        )
        await self._store.create_udf(udf)
        log.info("udf_created", udf_id=udf.id, name=udf.name)
        return _udf_out(udf)

    async def list_udfs(self, call: Call[None]) -> m.UdfList:
        """Every saved UDF, oldest first."""
        return m.UdfList(data=[_udf_out(u) for u in await self._store.list_udfs()])

    async def delete_udf(self, call: Call[None]) -> None:
        """Delete a saved UDF. Pipelines compiled with it keep it; queries calling it no longer
        compile."""
        udf_id = call.path("udf_id")
        try:
            await self._store.delete_udf(UdfId(udf_id))
        except NotFound as err:
            raise ResourceNotFoundError(f"UDF {udf_id} does not exist") from err
        log.info("udf_deleted", udf_id=udf_id)

    async def _validate(self, definition: str) -> m.UdfValidation:
        await self._compiler_ready()
        request = compiler_pb2.ValidateUdfsRequest(udfs=definition)
        try:
            response = await self._compiler.validate_udfs(
                request, timeout_s=VALIDATE_TIMEOUT_S, wait_for_ready=True
            )
        except RpcError as err:
            raise from_rpc("compiler", err) from err
        diagnostics = [_diagnostic(d) for d in response.diagnostics]
        names = [u.name for u in response.udfs]
        if not diagnostics and len(names) != 1:
            what = "none" if not names else ", ".join(names)
            diagnostics = [
                m.Diagnostic(
                    code="bad_udf",
                    message=f"a saved UDF file defines exactly one UDF; this one defines {what}",
                    line=None,
                    column=None,
                )
            ]
        return m.UdfValidation(
            udf_name=names[0] if not diagnostics else None,
            errors=[d.message for d in diagnostics],
            diagnostics=diagnostics,
        )


def _diagnostic(d: common_pb2.Diagnostic) -> m.Diagnostic:
    at = _AT_LINE.match(d.message)
    line = d.line or (int(at[1]) if at else 0)
    return m.Diagnostic(
        code=d.code, message=d.message, line=line or None, column=d.column or (1 if line else None)
    )


def _udf_out(udf: SavedUdf) -> m.UdfOut:
    return m.UdfOut(
        id=udf.id,
        name=udf.name,
        prefix=udf.prefix,
        language=udf.language,
        definition=udf.definition,
        description=udf.description,
        created_at=udf.created_at,
        updated_at=udf.updated_at,
    )
