CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
INSERT INTO out
SELECT count(*) AS n, max(amount) AS top, approx_distinct("user") AS users, count(DISTINCT kind) AS kinds
FROM events;
