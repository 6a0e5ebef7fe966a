CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- The three largest amounts of each user (Nexmark q19's shape), one row per rank, updated as
-- events arrive.
INSERT INTO out
SELECT "user", rn, id, amount FROM (
    SELECT "user", id, amount,
           ROW_NUMBER() OVER (PARTITION BY "user" ORDER BY amount DESC) AS rn
    FROM events
) WHERE rn <= 3;
