"""The OpenAPI 3.1 document of the REST API, generated from the route table and the models.

Nothing here is written by hand per endpoint: paths, methods, parameters, request bodies and
responses come from ``arroyo.api.routes.ROUTES``; schemas from the pydantic models' JSON schemas
(JSON Schema 2020-12, which OpenAPI 3.1 uses as is), collected under ``components.schemas``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from arroyo.api.models import ErrorBody
from arroyo.api.routing import EVENT_STREAM, JSON, Route

OPENAPI_VERSION = "3.1.0"
API_VERSION = "1"
_REF = "#/components/schemas/{model}"

Mode = Literal["validation", "serialization"]
# (model, mode) -> {"$ref": "#/components/schemas/<name>"}
_Refs = dict[tuple[type[BaseModel], Mode], dict[str, Any]]


def openapi_document(routes: Sequence[Route[Any, Any]]) -> dict[str, Any]:
    """The document for ``routes``; a pure function of them, the same on every call."""
    wanted: dict[tuple[type[BaseModel], Mode], None] = {(ErrorBody, "serialization"): None}
    for route in routes:
        for model in (route.body, route.query):
            if model is not None:
                wanted[(model, "validation")] = None
        if route.response is not None:
            wanted[(route.response, "serialization")] = None
    generated, definitions = models_json_schema(list(wanted), ref_template=_REF)
    refs: _Refs = {
        (model, mode): ref
        for (model, mode), ref in generated.items()
        if isinstance(model, type) and issubclass(model, BaseModel)
    }
    schemas: dict[str, Any] = definitions.get("$defs", {})

    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.full_path, {})[route.method.lower()] = _operation(
            route, refs, schemas
        )
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Arroyo",
            "version": API_VERSION,
            "description": "Streaming SQL pipelines on Spark Structured Streaming.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            # arroyo.api.auth: required beyond loopback, and on loopback once a key exists.
            "securitySchemes": {
                "apiKey": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a key made by `arroyo keys create` (<id>.<secret>)",
                },
                "cookie": {"type": "apiKey", "in": "cookie", "name": "arroyo_key"},
            },
        },
        "security": [{"apiKey": []}, {"cookie": []}],
    }


def _operation(
    route: Route[Any, Any],
    refs: _Refs,
    schemas: dict[str, Any],
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "tags": [route.tag],
    }
    if route.public:
        operation["security"] = []  # none: answered without a key
    description = inspect.getdoc(route.handler)
    if description:
        operation["description"] = description
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.path_parameters
    ]
    if route.query is not None:
        parameters += _query_parameters(route.query, refs[(route.query, "validation")], schemas)
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {JSON: {"schema": refs[(route.body, "validation")]}},
        }
    operation["responses"] = {
        str(route.status): _success(route, refs),
        **{
            str(status): {
                "description": HTTPStatus(status).phrase,
                "content": {JSON: {"schema": refs[(ErrorBody, "serialization")]}},
            }
            for status in sorted(_error_statuses(route))
        },
    }
    return operation


def _query_parameters(
    model: type[BaseModel], ref: dict[str, Any], schemas: dict[str, Any]
) -> list[dict[str, Any]]:
    """A query model's fields as ``in: query`` parameters."""
    schema_name = ref["$ref"].removeprefix(_REF.format(model=""))
    properties = schemas[schema_name].get("properties", {})
    return [
        {
            "name": name,
            "in": "query",
            "required": field.is_required(),
            "schema": {k: v for k, v in properties[name].items() if k != "description"},
            **({"description": field.description} if field.description else {}),
        }
        for name, field in model.model_fields.items()
    ]


def _success(route: Route[Any, Any], refs: _Refs) -> dict[str, Any]:
    response: dict[str, Any] = {"description": HTTPStatus(route.status).phrase}
    if route.status == HTTPStatus.NO_CONTENT:
        return response
    if route.content_type == EVENT_STREAM:
        response["content"] = {EVENT_STREAM: {"schema": {"type": "string"}}}
    elif route.response is not None:
        response["content"] = {JSON: {"schema": refs[(route.response, "serialization")]}}
    else:
        response["content"] = {JSON: {"schema": {"type": "object"}}}
    return response


def _error_statuses(route: Route[Any, Any]) -> set[int]:
    statuses = {500, *route.errors} if route.public else {401, 500, *route.errors}
    if route.body is not None or route.query is not None:
        statuses.add(400)
    if route.path_parameters:
        statuses.add(404)
    return statuses
