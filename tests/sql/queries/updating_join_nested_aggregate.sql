CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/payments.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An aggregate over an updating aggregate over a join (Nexmark q4's shape): each customer's
-- average, over payment methods, of the largest payment by that method. The inner maximum
-- changes as payments arrive; the outer average retracts what it counted before.
INSERT INTO out
SELECT customer, avg(biggest) AS avg_biggest, count(*) AS methods
FROM (
    SELECT o.customer AS customer, p.method AS method, max(p.paid) AS biggest
    FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id
    GROUP BY o.customer, p.method
) AS Q
GROUP BY customer;
