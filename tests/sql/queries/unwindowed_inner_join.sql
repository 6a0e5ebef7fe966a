CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/payments.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
-- An inner equi-join without windows: every matching pair, whenever its rows arrive.
INSERT INTO out
SELECT o.order_id, o.customer, p.method, p.paid - o.total AS balance
FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id;
