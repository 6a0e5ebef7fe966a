-- A session window with no other key: one stream of sessions over every row (Spark alone
-- refuses a streaming session window without a key).
CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts AS ts - INTERVAL '2 seconds'
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out
SELECT session(interval '8 seconds') AS window, count(*) AS events, min(id) AS first_id
FROM events
GROUP BY window;
