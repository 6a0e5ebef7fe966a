-- Debezium records whose TIMESTAMP fields arrive as integers (as Debezium writes a Postgres
-- timestamp) or as text. Arroyo reads an integer in its TIMESTAMP's unit, nanoseconds, and
-- writes change records' timestamps as milliseconds since the epoch: so a Debezium
-- microsecond value comes out a thousandth of itself, as in Arroyo's own golden output.
CREATE TABLE orders (id BIGINT NOT NULL PRIMARY KEY, product TEXT, order_date TIMESTAMP)
WITH (connector = 'single_file', path = '$input_dir/cdc_orders.json', format = 'debezium_json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
INSERT INTO out SELECT id, product, order_date FROM orders;
