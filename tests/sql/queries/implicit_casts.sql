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
CREATE TABLE out (window_end TIMESTAMP, c DOUBLE, total_cents BIGINT, label TEXT)
WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out
SELECT window.end, c, total, 42
FROM (
    SELECT tumble(interval '5 minutes') AS window, count(*) AS c, round(sum(amount) * 100) AS total
    FROM events
    GROUP BY 1
);
