"""Tests of the `arroyo` command and `arroyo cluster`'s readiness watch."""
