-- Query 17: auction statistics per day (an updating aggregate). As ours, the average is a
-- DOUBLE (nexmark-flink's avg of a BIGINT is a BIGINT).
CREATE TABLE sink (
    auction BIGINT,
    `day` STRING,
    total_bids BIGINT,
    rank1_bids BIGINT,
    rank2_bids BIGINT,
    rank3_bids BIGINT,
    min_price BIGINT,
    max_price BIGINT,
    avg_price DOUBLE,
    sum_price BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, DATE_FORMAT(date_time, 'yyyy-MM-dd') AS `day`,
       count(*) AS total_bids,
       count(*) FILTER (WHERE price < 10000) AS rank1_bids,
       count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
       count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
       min(price) AS min_price,
       max(price) AS max_price,
       avg(CAST(price AS DOUBLE)) AS avg_price,
       sum(price) AS sum_price
FROM bid
GROUP BY auction, DATE_FORMAT(date_time, 'yyyy-MM-dd');
