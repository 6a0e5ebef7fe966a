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
-- A stream joined with a lookup table (a static dimension table): each event meets the users
-- table as it is when its micro-batch runs; carol has no row there, so she keeps NULLs.
INSERT INTO out
SELECT e.id, e."user", u.country, u.tier, e.amount
FROM events AS e LEFT JOIN users AS u ON e."user" = u.name;
