-- Query 10: log every bid with its date and hour (Nexmark writes them to a file system
-- partitioned by these; the benchmark's sink is a blackhole).
INSERT INTO sink
SELECT bid.auction, bid.bidder, bid.price, bid.datetime, bid.extra,
       date_format(bid.datetime, 'yyyy-MM-dd') AS dt, date_format(bid.datetime, 'HH:mm') AS hm
FROM nexmark WHERE bid IS NOT NULL;
