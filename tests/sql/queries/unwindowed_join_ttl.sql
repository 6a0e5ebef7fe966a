SET updating_ttl = INTERVAL '40 seconds';
CREATE TABLE a (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE b (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
-- A customer orders every 39 seconds: with a 40-second TTL, each order meets only the
-- customer's next one (the one after that comes when the first has expired).
INSERT INTO out
SELECT a.customer, a.order_id AS first, b.order_id AS next
FROM a JOIN b ON a.customer = b.customer AND a.order_id < b.order_id;
