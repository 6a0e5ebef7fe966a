-- Query 15: bidding statistics per day (an updating aggregate). Ours counts distinct bidders and
-- auctions over all bids only (nexmark-flink's also per price rank).
CREATE TABLE sink (
    `day` STRING,
    total_bids BIGINT,
    rank1_bids BIGINT,
    rank2_bids BIGINT,
    rank3_bids BIGINT,
    total_bidders BIGINT,
    total_auctions BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT DATE_FORMAT(date_time, 'yyyy-MM-dd') AS `day`,
       count(*) AS total_bids,
       count(*) FILTER (WHERE price < 10000) AS rank1_bids,
       count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
       count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
       count(DISTINCT bidder) AS total_bidders,
       count(DISTINCT auction) AS total_auctions
FROM bid
GROUP BY DATE_FORMAT(date_time, 'yyyy-MM-dd');
