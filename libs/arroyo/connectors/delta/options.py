"""The delta connector's options: the filesystem sink's, less those Delta decides itself."""

from __future__ import annotations

from pydantic import model_validator

from arroyo.connectors.filesystem.options import FilesystemOptions

# The filesystem sink's options that Delta's writer decides for itself, and why.
_DELTA_DECIDES = {
    "filename.prefix": "Delta names a table's files itself",
    "filename.suffix": "Delta names a table's files itself",
    "filename.strategy": "Delta names a table's files itself",
    "rolling_policy.file_size": "Delta writes one file per partition and task of a micro-batch "
    "(run OPTIMIZE on the table to compact them)",
    "partitioning.time_pattern": "a Delta table is partitioned by columns: add a column "
    "computed from the event time and name it in partitioning.fields",
}


class DeltaOptions(FilesystemOptions):
    """Arroyo's ``delta`` table takes the filesystem sink's options (``path``, ``storage.*``,
    ``rolling_policy.*``, ``partitioning.*``); those Delta decides for itself are refused."""

    @model_validator(mode="after")
    def _delta_decides(self) -> DeltaOptions:
        given = self.model_dump(by_alias=True, exclude_defaults=True)
        refused = [f"{name}: {why}" for name, why in _DELTA_DECIDES.items() if name in given]
        if refused:
            raise ValueError("not taken by a delta table; " + "; ".join(refused))
        return self
