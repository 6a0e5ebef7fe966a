-- Query 22: the directories of each bid's URL (ours: split_part(url, '/', 4..6), 1-based; Flink's
-- SPLIT_INDEX is 0-based).
CREATE TABLE sink (
    auction BIGINT,
    bidder BIGINT,
    price BIGINT,
    channel STRING,
    dir1 STRING,
    dir2 STRING,
    dir3 STRING
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, bidder, price, channel,
       SPLIT_INDEX(url, '/', 3) AS dir1,
       SPLIT_INDEX(url, '/', 4) AS dir2,
       SPLIT_INDEX(url, '/', 5) AS dir3
FROM bid;
