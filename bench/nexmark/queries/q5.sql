-- Query 5: hot items: the auctions with the most bids in each 10-second window, every 2 seconds
-- (Arroyo's form: a hop window count, its maximum per window, joined back on the window).
CREATE VIEW counts AS
SELECT bid.auction AS auction, hop(interval '2 seconds', interval '10 seconds') AS window,
       count(*) AS num
FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2;
CREATE VIEW maxima AS SELECT window, max(num) AS maxn FROM counts GROUP BY window;
INSERT INTO sink
SELECT C.auction, C.num
FROM counts AS C JOIN maxima AS M ON C.window = M.window
WHERE C.num >= M.maxn;
