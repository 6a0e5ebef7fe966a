CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    device STRUCT<os TEXT, version INT>,
    tags TEXT[],
    WATERMARK FOR ts AS ts - INTERVAL '2 seconds'
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
CREATE VIEW per_user AS
SELECT tumble(interval '1 minute') AS window, "user", count(*) AS c
FROM events
GROUP BY 1, 2;

INSERT INTO out
SELECT window, max(c) AS busiest, sum(c) AS total
FROM per_user
GROUP BY window;
