-- Query 7: highest bid in each 10-second window. The bids side is a windowed GROUP BY (the
-- engine windows rows through aggregates), so identical bids in one window count once.
CREATE VIEW bids AS
SELECT bid.auction AS auction, bid.price AS price, bid.bidder AS bidder,
       tumble(interval '10 seconds') AS window
FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2, 3, 4;
CREATE VIEW maxima AS
SELECT tumble(interval '10 seconds') AS window, max(bid.price) AS maxprice
FROM nexmark WHERE bid IS NOT NULL GROUP BY 1;
INSERT INTO sink
SELECT B.auction, B.price, B.bidder
FROM bids AS B JOIN maxima AS M ON B.window = M.window
WHERE B.price = M.maxprice;
