-- Query 14: calculation: a time-of-day label and a character count per bid (Flink's
-- count_char UDF written as SQL).
INSERT INTO sink
SELECT bid.auction, bid.bidder, 0.908 * bid.price AS price,
       CASE
           WHEN hour(bid.datetime) >= 8 AND hour(bid.datetime) <= 18 THEN 'dayTime'
           WHEN hour(bid.datetime) <= 6 OR hour(bid.datetime) >= 20 THEN 'nightTime'
           ELSE 'otherTime'
       END AS bid_time_type,
       bid.datetime, bid.extra,
       length(bid.extra) - length(replace(bid.extra, 'c', '')) AS c_counts
FROM nexmark
WHERE bid IS NOT NULL AND 0.908 * bid.price > 1000000 AND 0.908 * bid.price < 50000000;
