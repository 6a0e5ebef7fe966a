-- Query 14: calculation: a time-of-day label and a character count per bid (nexmark-flink's
-- count_char UDF written as SQL, as ours).
CREATE TABLE sink (
    auction BIGINT,
    bidder BIGINT,
    price DECIMAL(23, 3),
    bid_time_type STRING,
    date_time TIMESTAMP(3),
    extra STRING,
    c_counts INT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, bidder, 0.908 * price AS price,
       CASE
           WHEN HOUR(date_time) >= 8 AND HOUR(date_time) <= 18 THEN 'dayTime'
           WHEN HOUR(date_time) <= 6 OR HOUR(date_time) >= 20 THEN 'nightTime'
           ELSE 'otherTime'
       END AS bid_time_type,
       date_time, extra,
       CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;
