CREATE TABLE products (id BIGINT NOT NULL PRIMARY KEY, name TEXT, qty BIGINT)
WITH (connector = 'single_file', path = '$input_dir/cdc.json', format = 'debezium_json', type = 'source');
CREATE TABLE out (big BOOLEAN)
WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- A projection of a changelog that leaves its key out is still a changelog, as in Arroyo: the
-- key travels hidden, so rows of equal values stay apart (two products are big, two are not)
-- and each change reaches the right one.
INSERT INTO out SELECT qty >= 3 FROM products;
