CREATE TABLE events (
    id BIGINT NOT NULL,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    cents BIGINT GENERATED ALWAYS AS (CAST(amount * 100 AS BIGINT)) STORED,
    minute_of_day INT GENERATED ALWAYS AS (extract(minute FROM ts)),
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out SELECT id, cents, minute_of_day FROM events WHERE id % 10 = 0;
