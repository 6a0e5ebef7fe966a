CREATE TABLE a (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE b (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
-- A join bounded in event time (an interval join): each order with the same customer's orders
-- of the next minute. A customer orders every 39 seconds, so each order meets itself and the
-- next one. The bound lets Spark drop each side's rows once the watermark is a minute past.
INSERT INTO out
SELECT a.customer, a.order_id AS first, b.order_id AS next
FROM a JOIN b ON a.customer = b.customer
WHERE b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE;
