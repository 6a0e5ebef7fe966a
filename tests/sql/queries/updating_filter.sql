CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
CREATE VIEW per_kind AS
SELECT kind, "user", count(*) AS c FROM events GROUP BY kind, "user";
-- A filter over an updating result: rows that stop qualifying are deleted.
INSERT INTO out
SELECT kind, "user", c FROM per_kind WHERE c <= 6;
