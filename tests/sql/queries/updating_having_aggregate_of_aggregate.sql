CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An aggregate over an updating aggregate with a HAVING, which goes through a stage of change
-- records (the retracting aggregate takes no HAVING): a user's kind counts while its amounts
-- sum to less than 250, and leaves the outer count once they pass it.
CREATE VIEW small AS
SELECT "user", kind, count(*) AS n FROM events GROUP BY "user", kind HAVING sum(amount) < 250;
INSERT INTO out SELECT "user", count(*) AS small_kinds, sum(n) AS events FROM small GROUP BY "user";
