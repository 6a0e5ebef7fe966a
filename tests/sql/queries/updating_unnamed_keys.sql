-- An updating aggregate whose keys the query leaves unnamed, into a sink that declares its
-- columns: the result's columns reach the sink's by position.
CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out (
    bucket BIGINT,
    initial TEXT,
    lowest BIGINT,
    events BIGINT
) WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
INSERT INTO out
SELECT id % 5, substr("user", 1, 1), min(id), count(*)
FROM events
GROUP BY 1, 2;
