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
-- Nexmark q5's shape: the busiest users of each hop window. Both sides of the join derive from
-- the one windowed count, so the join runs per micro-batch over the count's closed windows.
CREATE VIEW counts AS
SELECT "user", hop(interval '30 seconds', interval '2 minutes') AS window, count(*) AS c
FROM events GROUP BY 1, 2;
CREATE VIEW maxima AS SELECT window, max(c) AS top FROM counts GROUP BY window;
INSERT INTO out
SELECT C.window.start AS start, C."user", C.c
FROM counts AS C JOIN maxima AS M ON C.window = M.window
WHERE C.c >= M.top;
