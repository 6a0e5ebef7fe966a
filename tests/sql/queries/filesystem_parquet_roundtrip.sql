CREATE TABLE events (id BIGINT NOT NULL, "user" TEXT, amount DOUBLE, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'filesystem', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'filesystem', path = '$output_path', format = 'parquet', type = 'sink');
INSERT INTO out SELECT id, "user", amount, ts FROM events WHERE id % 7 = 0;
