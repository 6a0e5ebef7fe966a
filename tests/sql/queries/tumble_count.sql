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
INSERT INTO out
SELECT tumble(interval '1 minute') AS window, "user", count(*) AS events, round(sum(amount), 2) AS total
FROM events
GROUP BY window, "user";
