"""What connectors share at run time, apart from any one connector.

- ``sinks``: writing micro-batches from the driver, once per batch id (the in-flight guard, the
  batch commit log, the foreachBatch function over a ``LineWriter``, encoded records through
  one).
- ``file_tables``: a file table as a bounded stream (with end-of-input markers) or whole
  (lookup): lines through our Java (``arroyo.files.BoundedLinesSource``, in the executors'
  JVMs), Parquet through ``files``, a Python streaming data source of Arrow batches.
- ``stage_files``: a stage's batches on disk and the data source that reads them back.
- ``generated``: event numbers from Spark's rate sources, and a source's first start time.
- ``nexmark_generator``: the Nexmark events' Spark data source, written in Java.

The data source modules (``files``, ``stage_files``) are imported by Spark's Python workers: they
import no connector package themselves, only pyarrow, pyspark and ``arroyo.program``.
"""
