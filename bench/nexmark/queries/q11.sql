-- Query 11: user sessions: bids per bidder per session (10-second gap).
INSERT INTO sink
SELECT bid.bidder AS bidder, session(interval '10 seconds') AS window, count(*) AS bid_count
FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2;
