CREATE TABLE orders (order_id BIGINT, customer TEXT, total BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/orders.json', format = 'json', type = 'source');
CREATE TABLE payments (order_id BIGINT, method TEXT, paid BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '$input_dir/payments.json', format = 'json', type = 'source');
CREATE TABLE events (
    id BIGINT NOT NULL,
    "user" TEXT,
    kind TEXT,
    amount DOUBLE,
    ts TIMESTAMP NOT NULL,
    WATERMARK FOR ts
) WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- An updating aggregate over a join of three streams (through a stage: Spark runs a join of
-- more than two inputs): each paid order with each of its customer's events. The stage's
-- rows take the first input's event time; naming the others' would leave the second join
-- with two event-time columns, which Spark refuses.
INSERT INTO out
SELECT o.customer, count(*) AS pairs, sum(p.paid) AS paid, count(DISTINCT e.kind) AS kinds
FROM orders AS o JOIN payments AS p ON o.order_id = p.order_id
JOIN events AS e ON e."user" = o.customer
GROUP BY o.customer;
