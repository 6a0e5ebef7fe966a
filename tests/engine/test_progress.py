"""The runner's progress reports (arroyo.engine.progress): Spark's JSON of a batch read as
PySpark's listener events hold it."""

from __future__ import annotations

import json

from arroyo.engine.plans import offset_json
from arroyo.engine.progress import parse

_REPORT = {
    "id": "2b5c9f3e-5b1a-4a59-9d7e-1a2b3c4d5e6f",
    "runId": "8e0f6a1c-2d3b-4c5d-8e9f-0a1b2c3d4e5f",
    "name": "out_0",
    "timestamp": "2026-11-29T10:00:00.000Z",
    "batchId": 3,
    "batchDuration": 120,
    "numInputRows": 10,
    "durationMs": {"triggerExecution": 120},
    "eventTime": {"watermark": "2026-11-29T09:59:59.000Z"},
    "stateOperators": [],
    "sources": [
        {
            "description": "KafkaV2[Subscribe[t]]",
            "startOffset": {"t": {"0": 5}},
            "endOffset": {"t": {"0": 15}},
            "latestOffset": None,
            "numInputRows": 10,
            # Spark leaves out a rate that is not a number (no time elapsed).
        }
    ],
    "sink": {"description": "ArroyoUploadsSink[s3a://b/out]", "numOutputRows": -1},
    "observedMetrics": {"eoi:files": {"eoi": True}},
}


def test_a_report_without_rates_reads_with_its_offsets_as_sparks_json() -> None:
    progress = parse(json.dumps(_REPORT))
    assert progress.batchId == 3
    assert progress.eventTime["watermark"] == "2026-11-29T09:59:59.000Z"
    (source,) = progress.sources
    assert source.inputRowsPerSecond is None
    assert source.endOffset == '{"t":{"0":15}}'
    assert offset_json(source.endOffset) == '{"t":{"0":15}}'
    assert progress.observedMetrics["eoi:files"].asDict() == {"eoi": True}
