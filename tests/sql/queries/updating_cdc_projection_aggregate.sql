CREATE TABLE products (id BIGINT NOT NULL PRIMARY KEY, name TEXT, qty BIGINT)
WITH (connector = 'single_file', path = '$input_dir/cdc.json', format = 'debezium_json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An aggregate over a projection that leaves the changelog's key out: the key travels hidden
-- through the stage between them, so each update retracts the row it replaces. FILTER and
-- min(DISTINCT) retract too.
CREATE VIEW quantities AS SELECT qty, name FROM products;
INSERT INTO out
SELECT count(*) AS n, sum(qty) AS total, max(qty) FILTER (WHERE name <> 'c2') AS most_but_c2,
       min(DISTINCT qty) AS least, count(DISTINCT qty) FILTER (WHERE qty > 0) AS positive
FROM quantities;
