CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/payments.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- The two customers who paid most by each payment method: a top-N over an updating aggregate
-- over a join. Each new payment changes a customer's sum, which can move them into or out of
-- the top two (ties go to the later name, so the result is one answer).
INSERT INTO out
SELECT method, rn, customer, paid FROM (
    SELECT method, customer, paid,
           ROW_NUMBER() OVER (PARTITION BY method ORDER BY paid DESC, customer DESC) AS rn
    FROM (
        SELECT p.method AS method, o.customer AS customer, sum(p.paid) AS paid
        FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id
        GROUP BY p.method, o.customer
    )
) WHERE rn <= 2;
