-- Query 4: average closing price per category (nexmark-flink's form: the average of each
-- auction's maximum valid bid over a regular join, an updating result that retracts).
CREATE TABLE sink (
    category BIGINT,
    avg_price DOUBLE
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT Q.category, AVG(CAST(Q.final AS DOUBLE)) AS avg_price
FROM (
    SELECT A.id, A.category, MAX(B.price) AS final
    FROM auction AS A, bid AS B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) AS Q
GROUP BY Q.category;
