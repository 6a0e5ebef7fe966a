-- WATERMARK FOR over an expression of the row: the event time is a virtual column, and the
-- watermark is written over the text it is parsed from (Arroyo's documented example).
CREATE TABLE events (
    id BIGINT NOT NULL,
    kind TEXT,
    ts TEXT,
    event_time TIMESTAMP GENERATED ALWAYS AS (CAST(ts AS TIMESTAMP)),
    WATERMARK FOR event_time AS CAST(ts AS TIMESTAMP) - INTERVAL '5 seconds'
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out
SELECT window.start AS window_start, window.end AS window_end, kind, events
FROM (
    SELECT tumble(interval '2 minutes') AS window, kind, count(*) AS events
    FROM events
    GROUP BY 1, 2
);
