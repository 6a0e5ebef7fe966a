-- Query 7: highest bid in each 10-second window. The bids side is a windowed GROUP BY (the
-- engine windows rows through aggregates), so identical bids in one window count once; the
-- maximum is taken over those bids, which gives the same maximum as over all of them and lets
-- the engine run the join per micro-batch over the one windowed aggregate. As only the bids at
-- their window's maximum can meet the join, that aggregate keeps just those (ties included) per
-- window, not every distinct bid (see _Rewriter._top_rows_root in libs/arroyo/sql/planner.py).
CREATE VIEW bids AS
SELECT bid.auction AS auction, bid.price AS price, bid.bidder AS bidder,
       tumble(interval '10 seconds') AS window
FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2, 3, 4;
CREATE VIEW maxima AS SELECT window, max(price) AS maxprice FROM bids GROUP BY window;
INSERT INTO sink
SELECT B.auction, B.price, B.bidder
FROM bids AS B JOIN maxima AS M ON B.window = M.window
WHERE B.price = M.maxprice;
