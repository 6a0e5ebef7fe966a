-- Query 19: the ten highest bids of each auction.
-- NOT YET: a top-N without windows is supported for N = 1 only (q18); for N > 1 the result
-- would be N changing rows per key, which the engine's updating results do not express yet.
INSERT INTO sink
SELECT auction, price FROM (
    SELECT bid.auction AS auction, bid.price AS price,
           ROW_NUMBER() OVER (PARTITION BY bid.auction ORDER BY bid.price DESC) AS rank_number
    FROM nexmark WHERE bid IS NOT NULL
) AS Q WHERE rank_number <= 10;
