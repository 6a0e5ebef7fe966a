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
CREATE VIEW buys AS SELECT id, "user", amount FROM events WHERE kind = 'buy';

INSERT INTO out
WITH big AS (SELECT * FROM buys WHERE amount > 50),
     small AS (SELECT * FROM buys WHERE amount <= 50)
SELECT id, 'big' AS size FROM big
UNION ALL
SELECT id, 'small' AS size FROM small;
