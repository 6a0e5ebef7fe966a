-- Arroyo's older table options: the event time and the watermark named by option, both virtual
-- columns over a text field; and idleness, which Spark needs nothing for within one table.
CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    amount DOUBLE,
    ts TEXT,
    event_time TIMESTAMP GENERATED ALWAYS AS (CAST(ts AS TIMESTAMP)),
    watermark TIMESTAMP GENERATED ALWAYS AS (CAST(ts AS TIMESTAMP) - INTERVAL '2 seconds')
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source',
    event_time_field = 'event_time', watermark_field = 'watermark', idle_micros = '1000000');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out
SELECT tumble(interval '1 minute') AS window, "user", count(*) AS events, round(sum(amount), 2) AS total
FROM events
GROUP BY window, "user";
