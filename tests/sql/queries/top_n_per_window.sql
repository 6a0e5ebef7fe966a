CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
-- The two biggest spenders of each minute.
INSERT INTO out
SELECT window.start AS minute, "user", total, rn FROM (
    SELECT *, ROW_NUMBER() OVER (PARTITION BY window ORDER BY total DESC, "user") AS rn
    FROM (
        SELECT tumble(interval '1 minute') AS window, "user", round(sum(amount), 2) AS total
        FROM events
        GROUP BY window, "user"
    ) AS per_user
) AS ranked
WHERE rn <= 2;
