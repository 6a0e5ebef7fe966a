"""Tests of arroyo.rpc: the typed clients, status translation, tracing, and the generated code."""
