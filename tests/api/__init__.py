"""Tests of the REST API (``arroyo.api``) over a real HTTP server, a real SQLite store, the
real compiler service and a gRPC test double of the controller."""
