-- Query 12: bids per bidder in 10-second windows of processing time.
-- DIFFERS: from nexmark-flink's (and not from ours), which tumbles on PROCTIME(): ours has event
-- time only, so both run on event time.
CREATE TABLE sink (
    bidder BIGINT,
    starttime TIMESTAMP(3),
    endtime TIMESTAMP(3),
    bid_count BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT bidder, window_start AS starttime, window_end AS endtime, count(*) AS bid_count
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end;
