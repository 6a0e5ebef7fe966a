-- Query 18: the last bid of each bidder on each auction (nexmark-flink's form: Flink's
-- deduplication, ROW_NUMBER() = 1, an updating result).
CREATE TABLE sink (
    auction BIGINT,
    bidder BIGINT,
    price BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, bidder, price FROM (
    SELECT auction, bidder, price,
           ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY date_time DESC) AS rn
    FROM bid
) WHERE rn <= 1;
