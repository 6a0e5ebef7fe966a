CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/payments.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An updating aggregate over a join without windows (Nexmark q4's inner query): the join
-- writes its rows into a stage, which the aggregate reads. A bare column keeps its name.
INSERT INTO out
SELECT o.customer, p.method, count(*) AS orders, sum(p.paid) AS paid, max(o.total) AS biggest
FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id
WHERE p.paid > 11
GROUP BY o.customer, p.method
HAVING count(*) > 1;
