-- Query 7: highest bid in each 10-second window. As ours, the bids side is a windowed GROUP BY
-- (so identical bids in one window count once) joined with each window's maximum, taken over
-- those bids, on the window (nexmark-flink joins the raw bids to the maxima with a time
-- condition instead).
CREATE TABLE sink (
    auction BIGINT,
    price BIGINT,
    bidder BIGINT
) WITH ('connector' = 'blackhole');

CREATE VIEW bids AS
SELECT auction, price, bidder, window_start, window_end
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, price, bidder, window_start, window_end;

CREATE VIEW maxima AS
SELECT window_start, window_end, max(price) AS maxprice
FROM bids
GROUP BY window_start, window_end;

INSERT INTO sink
SELECT B.auction, B.price, B.bidder
FROM bids AS B JOIN maxima AS M
    ON B.window_start = M.window_start AND B.window_end = M.window_end
WHERE B.price = M.maxprice;
