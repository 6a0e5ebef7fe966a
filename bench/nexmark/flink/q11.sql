-- Query 11: user sessions: bids per bidder per session (10-second gap).
CREATE TABLE sink (
    bidder BIGINT,
    starttime TIMESTAMP(3),
    endtime TIMESTAMP(3),
    bid_count BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT bidder, window_start AS starttime, window_end AS endtime, count(*) AS bid_count
FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
