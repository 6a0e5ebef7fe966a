"""Arroyo on Spark: streaming SQL compiled onto Spark Structured Streaming."""

__version__ = "0.1.0"
