CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- min, max and count(DISTINCT) over an updating aggregate: each new event changes its user's
-- and kind's count, and the per-user aggregates forget the count it replaces (a user's
-- fewest events per kind grows past counts that no kind has any more).
CREATE VIEW per_kind AS
SELECT "user", kind, count(*) AS n, max(amount) AS top
FROM events GROUP BY "user", kind;
INSERT INTO out
SELECT "user", min(n) AS fewest, max(n) AS most, count(DISTINCT n) AS sizes, max(top) AS top,
       min(kind) AS first_kind
FROM per_kind GROUP BY "user";
