-- Query 18: the last bid of each bidder on each auction. ROW_NUMBER() = 1 over input without
-- windows is an updating result: the engine runs it as GROUP BY bidder, auction with
-- max_by(row, datetime), and the sink takes each change.
INSERT INTO sink
SELECT auction, bidder, price FROM (
    SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price,
           ROW_NUMBER() OVER (PARTITION BY bid.bidder, bid.auction ORDER BY bid.datetime DESC) AS rn
    FROM nexmark WHERE bid IS NOT NULL
) AS Q WHERE rn <= 1;
