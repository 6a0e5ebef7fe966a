-- Query 12: bids per bidder in 10-second windows of processing time.
-- DIFFERS: the engine has event time only (no PROCTIME()), so this runs on event time.
INSERT INTO sink
SELECT bid.bidder AS bidder, tumble(interval '10 seconds') AS window, count(*) AS bid_count
FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2;
