"""The api service's logic: the REST API under ``/api/v1`` (aiohttp), its OpenAPI document,
and the web UI's files. ``services/api`` wires it to the config, the store and the clients."""

from arroyo.api.app import create_app
from arroyo.api.openapi import openapi_document
from arroyo.api.routes import ROUTES
from arroyo.api.webui import web_root

__all__ = ["ROUTES", "create_app", "openapi_document", "web_root"]
