"""The single_file connector's options."""

from __future__ import annotations

from pydantic import Field

from arroyo.connectors.base import ConnectorOptions


class SingleFileOptions(ConnectorOptions):
    path: str = Field(description="local path of the file")
