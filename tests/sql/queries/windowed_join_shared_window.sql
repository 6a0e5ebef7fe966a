CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/payments.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');

CREATE VIEW order_counts AS
SELECT tumble(interval '1 minute') AS window, customer, count(*) AS orders, sum(total) AS ordered
FROM orders GROUP BY 1, 2;
CREATE VIEW payment_counts AS
SELECT tumble(interval '1 minute') AS window, method, count(*) AS payments, sum(paid) AS paid
FROM payments GROUP BY 1, 2;

-- The join makes the two windows one, so the query names it without saying whose.
INSERT INTO out
SELECT window.start AS minute, window.end AS minute_end, o.customer, o.orders, p.method, p.payments
FROM order_counts o JOIN payment_counts p ON o.window = p.window
WHERE o.customer = 'alice';
