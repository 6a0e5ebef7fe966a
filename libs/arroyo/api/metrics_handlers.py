"""The handlers of a job's metrics, mixed into ``arroyo.api.handlers.Api`` (whose controller
client they use): the recent samples of each query, and each operator's history in Arroyo's
``operator_metric_groups`` shape (arroyo.controller.history keeps it)."""

from __future__ import annotations

from typing import Any

from arroyo.api import models as m
from arroyo.api.errors import from_rpc
from arroyo.api.routing import Call
from arroyo.rpc import NOT_FOUND, ControllerClient, RpcError
from arroyo.store.model import Job
from arroyo_rpc.v1 import controller_pb2

CONTROLLER_TIMEOUT_S = 5.0


class MetricsHandlers:
    """A job's metrics. Needs ``_controller`` and ``_job``, as ``Api`` sets them."""

    _controller: ControllerClient

    async def _job(self, call: Call[Any]) -> Job:
        raise NotImplementedError  # Api's

    async def get_job_metrics(self, call: Call[None]) -> m.JobMetrics:
        """Recent metric samples of the running job, from the controller (503 when the
        controller cannot be reached); empty when the job is not running."""
        job, response = await self._metrics(call, operators=False)
        return m.JobMetrics(job_id=job.id, samples=[_sample(s) for s in response.samples])

    async def get_operator_metric_groups(self, call: Call[None]) -> m.OperatorMetricGroupList:
        """Each operator's metrics over the controller's retention (an hour by default), in
        buckets (five seconds by default), oldest first; empty when the job is not running."""
        _, response = await self._metrics(call, operators=True)
        return m.OperatorMetricGroupList(data=[_groups(o) for o in response.operators])

    async def _metrics(
        self, call: Call[None], operators: bool
    ) -> tuple[Job, controller_pb2.GetJobMetricsResponse]:
        job = await self._job(call)
        request = controller_pb2.GetJobMetricsRequest(job_id=job.id, operators=operators)
        try:
            response = await self._controller.get_job_metrics(
                request, timeout_s=CONTROLLER_TIMEOUT_S
            )
        except RpcError as err:
            if err.code != NOT_FOUND:
                raise from_rpc("controller", err) from err
            # The controller keeps metrics of live jobs only.
            response = controller_pb2.GetJobMetricsResponse()
        return job, response


def _groups(o: controller_pb2.OperatorSeries) -> m.OperatorMetricGroup:
    return m.OperatorMetricGroup(
        operatorId=o.operator_id,
        label=o.label,
        metricGroups=[
            m.MetricGroup(
                name=s.name,
                # A Spark query runs as one task here: one subtask, 0.
                subtasks=[
                    m.SubtaskMetrics(
                        index=0,
                        metrics=[m.Metric(time=p.time_micros, value=p.value) for p in s.points],
                    )
                ],
            )
            for s in o.series
        ],
    )


def _sample(s: controller_pb2.MetricsSample) -> m.MetricsSample:
    return m.MetricsSample(
        time_micros=s.time_micros,
        operators=[
            m.OperatorMetrics(
                query=o.query,
                rows_in=o.rows_in,
                rows_out=o.rows_out,
                rows_in_per_second=o.rows_in_per_second,
                rows_processed_per_second=o.rows_processed_per_second,
                batch_duration_micros=o.batch_duration_micros,
                state_rows=o.state_rows,
                state_bytes=o.state_bytes,
                dropped_bad_records=o.dropped_bad_records,
                dropped_overflow_messages=o.dropped_overflow_messages,
                # 0 in the message: no watermark yet.
                watermark_micros=o.watermark_micros or None,
            )
            for o in s.operators
        ],
    )
