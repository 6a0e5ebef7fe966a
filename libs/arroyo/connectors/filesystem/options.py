"""The filesystem connector's options."""

from __future__ import annotations

from pydantic import Field

from arroyo.connectors.base import ConnectorOptions


class FilesystemOptions(ConnectorOptions):
    path: str = Field(description="local path of the directory")
