CREATE TABLE products (id BIGINT NOT NULL PRIMARY KEY, name TEXT, qty BIGINT)
WITH (connector = 'single_file', path = '$input_dir/cdc.json', format = 'debezium_json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An aggregate over a filtered view of a changelog: a product enters the view, leaves it when
-- its quantity drops (or it is deleted), and the totals follow.
CREATE VIEW big AS SELECT id, qty FROM products WHERE qty >= 3;
INSERT INTO out SELECT count(*) AS products, sum(qty) AS total FROM big;
