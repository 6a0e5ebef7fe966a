CREATE TABLE products (id BIGINT NOT NULL PRIMARY KEY, name TEXT, qty BIGINT)
WITH (connector = 'single_file', path = '$input_dir/cdc.json', format = 'debezium_json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'debezium_json', type = 'sink');
-- min, max and count(DISTINCT) over a changelog retract too: each group keeps its multiset of
-- values, so a deleted or updated row's value is forgotten (product b's 5 is nobody's maximum
-- once b is deleted).
INSERT INTO out
SELECT qty >= 3 AS big, min(qty) AS least, max(qty) AS most, count(DISTINCT qty) AS quantities,
  min(name) AS first_name, max(name) AS last_name
FROM products
GROUP BY qty >= 3;
