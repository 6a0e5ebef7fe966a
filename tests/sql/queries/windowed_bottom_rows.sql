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
-- Nexmark q7's shape: the distinct (user, kind, version) of each window that have the window's
-- lowest version, ties included. The planner keeps only each window's bottom rows in state
-- (an aggregate keyed by the window), not every distinct row.
CREATE VIEW seen AS
SELECT "user", kind, device.version AS version, tumble(interval '30 seconds') AS window
FROM events GROUP BY 1, 2, 3, 4;
CREATE VIEW oldest AS SELECT window, min(version) AS top FROM seen GROUP BY window;
INSERT INTO out
SELECT S.window.start AS start, S."user", S.kind, S.version, N.top
FROM seen AS S JOIN oldest AS N ON S.window = N.window
WHERE S.version = N.top;
