"""Every route of the REST API, once: ``create_app`` serves this table and ``openapi_document``
describes it. Paths are below ``/api/v1``."""

from __future__ import annotations

from typing import Any

from arroyo.api import models as m
from arroyo.api.handlers import Api
from arroyo.api.routing import EVENT_STREAM, Route

_PIPELINE = "/pipelines/{pipeline_id}"
_JOB = _PIPELINE + "/jobs/{job_id}"
_PROFILE = "/connection_profiles/{profile_id}"

ROUTES: tuple[Route[Api, Any], ...] = (
    Route("GET", "/ping", Api.ping, "Check that the api is up", "meta", response=m.Pong),
    Route(
        "GET",
        "/status",
        Api.cluster_status,
        "Check whether the cluster can take a pipeline",
        "meta",
        response=m.ClusterStatus,
    ),
    Route("GET", "/openapi.json", Api.openapi, "This document", "meta"),
    Route(
        "POST",
        "/pipelines/validate_query",
        Api.validate_query,
        "Compile a query without storing it",
        "pipelines",
        body=m.ValidateQueryRequest,
        response=m.ValidateQueryResponse,
        errors=(502, 503),
    ),
    Route(
        "POST",
        "/pipelines",
        Api.create_pipeline,
        "Create a pipeline and start its job",
        "pipelines",
        body=m.CreatePipelineRequest,
        response=m.PipelineOut,
        status=201,
        errors=(502, 503),
    ),
    Route(
        "POST",
        "/pipelines/preview",
        Api.preview_pipeline,
        "Create a preview pipeline",
        "pipelines",
        body=m.PreviewPipelineRequest,
        response=m.PipelineOut,
        status=201,
        errors=(502, 503),
    ),
    Route(
        "GET",
        "/pipelines",
        Api.list_pipelines,
        "List pipelines, a page at a time",
        "pipelines",
        query=m.ListPipelinesQuery,
        response=m.PipelinePage,
    ),
    Route(
        "GET", _PIPELINE, Api.get_pipeline, "Get a pipeline", "pipelines", response=m.PipelineOut
    ),
    Route(
        "PATCH",
        _PIPELINE,
        Api.update_pipeline,
        "Stop, start or reconfigure a pipeline's job",
        "pipelines",
        body=m.UpdatePipelineRequest,
        response=m.PipelineOut,
    ),
    Route(
        "DELETE",
        _PIPELINE,
        Api.delete_pipeline,
        "Delete a stopped pipeline",
        "pipelines",
        status=204,
        errors=(409,),
    ),
    Route(
        "POST",
        _PIPELINE + "/restart",
        Api.restart_pipeline,
        "Restart a pipeline's job",
        "pipelines",
        body=m.RestartPipelineRequest,
        response=m.PipelineOut,
    ),
    Route(
        "GET",
        _PIPELINE + "/jobs",
        Api.list_pipeline_jobs,
        "List a pipeline's jobs",
        "jobs",
        response=m.JobList,
    ),
    Route("GET", "/jobs", Api.list_jobs, "List every job", "jobs", response=m.JobList),
    Route(
        "GET",
        _JOB + "/checkpoints",
        Api.list_checkpoints,
        "List a job's checkpoints",
        "jobs",
        query=m.ListQuery,
        response=m.CheckpointList,
    ),
    Route(
        "GET",
        _JOB + "/errors",
        Api.list_job_errors,
        "List a job's errors",
        "jobs",
        query=m.ListQuery,
        response=m.JobErrorList,
    ),
    Route(
        "GET",
        _JOB + "/metrics",
        Api.get_job_metrics,
        "Get a job's recent metrics",
        "jobs",
        response=m.JobMetrics,
        errors=(502, 503),
    ),
    Route(
        "GET",
        _JOB + "/output",
        Api.stream_output,
        "Stream a job's output rows (server-sent events)",
        "jobs",
        content_type=EVENT_STREAM,
        errors=(502, 503),
    ),
    Route(
        "GET",
        "/connectors",
        Api.list_connectors,
        "List the connectors, their options and connection settings",
        "connections",
        response=m.ConnectorList,
    ),
    # Before the {profile_id} routes, so "test" is never taken for an id.
    Route(
        "POST",
        "/connection_profiles/test",
        Api.test_connection,
        "Test connection settings without saving them",
        "connections",
        body=m.ConnectionTestRequest,
        response=m.ConnectionTestResult,
    ),
    Route(
        "POST",
        "/connection_profiles",
        Api.create_connection_profile,
        "Save a connection profile",
        "connections",
        body=m.CreateConnectionProfileRequest,
        response=m.ConnectionProfileOut,
        status=201,
        errors=(409,),
    ),
    Route(
        "GET",
        "/connection_profiles",
        Api.list_connection_profiles,
        "List connection profiles",
        "connections",
        response=m.ConnectionProfileList,
    ),
    Route(
        "GET",
        _PROFILE,
        Api.get_connection_profile,
        "Get a connection profile",
        "connections",
        response=m.ConnectionProfileOut,
    ),
    Route(
        "DELETE",
        _PROFILE,
        Api.delete_connection_profile,
        "Delete a connection profile",
        "connections",
        status=204,
    ),
)
