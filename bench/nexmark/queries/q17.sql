-- Query 17: auction statistics per day (an updating aggregate).
INSERT INTO sink
SELECT bid.auction AS auction, date_format(bid.datetime, 'yyyy-MM-dd') AS day,
       count(*) AS total_bids,
       count(*) FILTER (WHERE bid.price < 10000) AS rank1_bids,
       count(*) FILTER (WHERE bid.price >= 10000 AND bid.price < 1000000) AS rank2_bids,
       count(*) FILTER (WHERE bid.price >= 1000000) AS rank3_bids,
       min(bid.price) AS min_price, max(bid.price) AS max_price,
       avg(bid.price) AS avg_price, sum(bid.price) AS sum_price
FROM nexmark WHERE bid IS NOT NULL
GROUP BY 1, 2;
