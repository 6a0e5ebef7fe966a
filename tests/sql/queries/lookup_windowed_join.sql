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
CREATE TABLE users (name TEXT, country TEXT, tier INT)
WITH (connector = 'single_file', path = '$input_dir/users.json', format = 'json', type = 'lookup');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
-- A windowed aggregate over a stream joined with a lookup table (Nexmark q13's side input):
-- the spend per country and minute of the events whose user the table knows.
INSERT INTO out
SELECT tumble(interval '1 minute') AS window, u.country, count(*) AS events, round(sum(e.amount), 2) AS spent
FROM events AS e JOIN users AS u ON e."user" = u.name
GROUP BY 1, 2;
