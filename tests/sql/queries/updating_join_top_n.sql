CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/payments.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- The largest payment of each customer and method, as Nexmark q9 picks each auction's winning
-- bid: ROW_NUMBER() = 1 over a join without windows, an updating result.
INSERT INTO out
SELECT customer, method, order_id, paid FROM (
    SELECT o.customer, p.method, o.order_id, p.paid,
           ROW_NUMBER() OVER (PARTITION BY o.customer, p.method ORDER BY p.paid DESC) AS rn
    FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id
) WHERE rn = 1;
