"""Fuzzing (issue 32, item 6): the REST API driven by schemathesis from its OpenAPI document,
the record formats' decoders over random and mutated records, and the SQL planner over
statements from a small grammar. Bounded and deterministic for CI (``fuzz`` marker);
``bench/fuzz.py`` runs the same with larger counts."""
