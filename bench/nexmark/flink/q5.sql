-- Query 5: hot items: the auctions with the most bids in each 10-second window, every 2 seconds
-- (Arroyo's form, as ours: a hop window count, its maximum per window, joined back on the
-- window). Both the maximum and the join stay windowed (a window aggregate over the counts'
-- windows, a window join), so each window's rows come out once, when it closes.
CREATE TABLE sink (
    auction BIGINT,
    num BIGINT
) WITH ('connector' = 'blackhole');

CREATE VIEW counts AS
SELECT auction, window_start, window_end, count(*) AS num
FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

CREATE VIEW maxima AS
SELECT window_start, window_end, max(num) AS maxn
FROM counts
GROUP BY window_start, window_end;

INSERT INTO sink
SELECT C.auction, C.num
FROM counts AS C JOIN maxima AS M
    ON C.window_start = M.window_start AND C.window_end = M.window_end
WHERE C.num >= M.maxn;
