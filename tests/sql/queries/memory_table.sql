CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
-- A memory table: written once, read twice.
CREATE TABLE buys (id BIGINT, "user" TEXT, cents BIGINT);
INSERT INTO buys SELECT id, "user", amount * 100 FROM events WHERE kind = 'buy';
INSERT INTO out
SELECT tumble(interval '2 minutes') AS window, count(*) AS buys, max(cents) AS top FROM buys GROUP BY window;
INSERT INTO out
SELECT tumble(interval '2 minutes') AS window, count(*) AS buys, min(cents) AS top FROM buys GROUP BY window;
