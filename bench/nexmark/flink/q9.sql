-- Query 9: winning bids: the highest valid bid of each auction (nexmark-flink's form, keeping
-- the columns ours keeps: ROW_NUMBER() = 1 over a regular join, an updating result).
CREATE TABLE sink (
    id BIGINT,
    price BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT id, price FROM (
    SELECT A.id AS id, B.price AS price,
           ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC) AS rownum
    FROM auction AS A, bid AS B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
) WHERE rownum <= 1;
