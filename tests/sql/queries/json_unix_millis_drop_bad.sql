CREATE TABLE src (id BIGINT NOT NULL, at TIMESTAMP NOT NULL, WATERMARK FOR at)
WITH (connector = 'single_file', path = '$input_dir/millis.json', format = 'json',
      'json.timestamp_format' = 'unix_millis', bad_data = 'drop', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json',
      'json.timestamp_format' = 'unix_millis', type = 'sink');
INSERT INTO out SELECT tumble(interval '30 seconds') AS w, count(*) AS c, min(at) AS first_at FROM src GROUP BY 1;
