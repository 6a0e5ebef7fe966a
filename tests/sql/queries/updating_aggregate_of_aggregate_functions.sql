CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An aggregate over an updating aggregate of each function that the retracting aggregate
-- runs in the outer aggregate's own query: count, count of a column, sum of integers and of
-- doubles, avg, min, max (of a timestamp too). Each new event changes its user's and kind's
-- row, and the per-user sums retract what that row counted before.
CREATE VIEW per_kind AS
SELECT "user", kind, count(*) AS n, count(amount) AS priced, sum(id) AS ids, sum(amount) AS total,
       avg(amount) AS mean, min(id) AS first_id, max(id) AS last_id, max(ts) AS last_ts
FROM events GROUP BY "user", kind;
INSERT INTO out
SELECT "user", count(*) AS kinds, sum(n) AS events, sum(priced) AS priced, sum(ids) AS ids,
       round(sum(total), 2) AS total, round(avg(mean), 4) AS mean_of_means,
       sum(first_id) AS first_ids, sum(last_id) AS last_ids, count(last_ts) AS timed
FROM per_kind GROUP BY "user";
