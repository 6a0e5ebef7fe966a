-- Query 19: the ten highest bids of each auction. ROW_NUMBER() <= 10 over input without windows
-- is an updating result: the engine runs it as GROUP BY auction with max_by(row, price, 10), one
-- row per rank, keyed by auction and rank (so the rank is selected, as nexmark-flink does).
INSERT INTO sink
SELECT auction, price, rank_number FROM (
    SELECT bid.auction AS auction, bid.price AS price,
           ROW_NUMBER() OVER (PARTITION BY bid.auction ORDER BY bid.price DESC) AS rank_number
    FROM nexmark WHERE bid IS NOT NULL
) AS Q WHERE rank_number <= 10;
