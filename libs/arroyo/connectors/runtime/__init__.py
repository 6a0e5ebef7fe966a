"""What connectors share at run time, apart from any one connector.

- ``sinks``: writing micro-batches from the driver, once per batch id (the in-flight guard, the
  batch commit log, the foreachBatch function over a ``LineWriter``, encoded records through
  one).
- ``file_tables``: a file table as a bounded stream (with end-of-input markers), read in the
  executors' JVMs by our Java (``arroyo.files.BoundedFilesSource``), or whole (lookup);
  ``files``: which files a path holds, and their lines decompressed.
- ``stage_files``: a stage's batches on disk and the data source that reads them back.
- ``generated``: event numbers from Spark's rate sources, and a source's first start time.
- ``nexmark_generator``: the Nexmark events' Spark data source, written in Java.
- ``spool``: messages of a source that cannot replay, kept so that micro-batches replay
  exactly; ``loop``: an asyncio loop on a thread of its own.
- ``http`` (no Spark: options, headers, the retry policy) and ``http_source`` (the spooled
  reader with its bounded buffer and reconnection): what the HTTP sources share.

The data source module ``stage_files`` is imported by Spark's Python workers: it
imports no connector package itself, only pyarrow, pyspark and ``arroyo.program``.
"""
