"""Tests of arroyo.formats: decoding records into a table's columns, and what bad data does."""
