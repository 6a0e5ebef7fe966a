-- ROW_NUMBER() without ORDER BY over windowed input, as Arroyo accepts it: rows are numbered
-- within each partition (here one row per user and minute, so every number is 1).
CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts AS ts - INTERVAL '2 seconds'
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out
SELECT window.start AS minute, "user", events, rn FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window, "user") AS rn
    FROM (
        SELECT tumble(interval '1 minute') AS window, "user", count(*) AS events
        FROM events
        GROUP BY window, "user"
    ) AS per_user
) AS numbered;
