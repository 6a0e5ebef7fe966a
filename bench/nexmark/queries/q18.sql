-- Query 18: the last bid of each bidder on each auction.
-- NOT YET: ROW_NUMBER over unwindowed input (an updating top-N) is refused.
INSERT INTO sink
SELECT auction, bidder, price FROM (
    SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price,
           ROW_NUMBER() OVER (PARTITION BY bid.bidder, bid.auction ORDER BY bid.datetime DESC) AS rn
    FROM nexmark WHERE bid IS NOT NULL
) AS Q WHERE rn <= 1;
