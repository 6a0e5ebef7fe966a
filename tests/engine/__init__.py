"""Tests of arroyo.engine: the Spark runner, its sessions, state and Arroyo's own operators."""
