-- Query 15: bidding statistics per day (an updating aggregate).
INSERT INTO sink
SELECT date_format(bid.datetime, 'yyyy-MM-dd') AS day,
       count(*) AS total_bids,
       count(*) FILTER (WHERE bid.price < 10000) AS rank1_bids,
       count(*) FILTER (WHERE bid.price >= 10000 AND bid.price < 1000000) AS rank2_bids,
       count(*) FILTER (WHERE bid.price >= 1000000) AS rank3_bids,
       count(DISTINCT bid.bidder) AS total_bidders,
       count(DISTINCT bid.auction) AS total_auctions
FROM nexmark WHERE bid IS NOT NULL
GROUP BY 1;
