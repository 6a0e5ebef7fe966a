CREATE TABLE products (id BIGINT NOT NULL PRIMARY KEY, name TEXT, qty BIGINT)
WITH (connector = 'single_file', path = '$input_dir/cdc.json', format = 'debezium_json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- Change records in, change records out; rows that stop qualifying are deleted downstream.
INSERT INTO out SELECT id, name, qty FROM products WHERE qty >= 2;
