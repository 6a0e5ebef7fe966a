CREATE TABLE products (id BIGINT NOT NULL PRIMARY KEY, name TEXT, qty BIGINT)
WITH (connector = 'single_file', path = '$input_dir/cdc.json', format = 'debezium_json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- Aggregates over a changelog retract: an update moves a product between groups, a delete
-- takes it away, and a group left empty is deleted.
INSERT INTO out
SELECT qty >= 3 AS big, count(*) AS products, sum(qty) AS total, avg(qty) AS mean
FROM products WHERE name <> 'e'
GROUP BY qty >= 3;
