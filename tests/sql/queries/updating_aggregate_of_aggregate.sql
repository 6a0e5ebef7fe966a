CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An aggregate over an updating aggregate: how many users have made each number of events.
-- Each new event moves its user from one count to the next, so the outer count retracts.
CREATE VIEW per_user AS SELECT "user", count(*) AS n FROM events GROUP BY "user";
INSERT INTO out SELECT n, count(*) AS users FROM per_user GROUP BY n;
