-- Query 19: the ten highest bids of each auction.
-- NOT YET: ROW_NUMBER over unwindowed input (an updating top-N) is refused.
INSERT INTO sink
SELECT auction, price FROM (
    SELECT bid.auction AS auction, bid.price AS price,
           ROW_NUMBER() OVER (PARTITION BY bid.auction ORDER BY bid.price DESC) AS rank_number
    FROM nexmark WHERE bid IS NOT NULL
) AS Q WHERE rank_number <= 10;
