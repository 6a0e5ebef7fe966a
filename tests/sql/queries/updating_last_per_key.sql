CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- The latest event of each user and kind (Nexmark q18's shape), updated as events arrive.
INSERT INTO out
SELECT "user", kind, id, amount, rn FROM (
    SELECT "user", kind, id, amount,
           ROW_NUMBER() OVER (PARTITION BY "user", kind ORDER BY ts DESC, id DESC) AS rn
    FROM events WHERE amount > 10
) WHERE rn = 1;
