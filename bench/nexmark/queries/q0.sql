-- Query 0: pass-through. Measures the cost of reading and writing events.
INSERT INTO sink
SELECT bid.auction, bid.bidder, bid.price, bid.datetime, bid.extra
FROM nexmark WHERE bid IS NOT NULL;
