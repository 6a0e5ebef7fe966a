-- Query 10: log every bid with its date and hour (Nexmark writes them to a file system
-- partitioned by these; the benchmark's sink is a blackhole).
CREATE TABLE sink (
    auction BIGINT,
    bidder BIGINT,
    price BIGINT,
    date_time TIMESTAMP(3),
    extra STRING,
    dt STRING,
    hm STRING
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, bidder, price, date_time, extra,
       DATE_FORMAT(date_time, 'yyyy-MM-dd') AS dt, DATE_FORMAT(date_time, 'HH:mm') AS hm
FROM bid;
