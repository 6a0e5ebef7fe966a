-- Query 0: pass-through. Measures the cost of reading and writing events.
CREATE TABLE sink (
    auction BIGINT,
    bidder BIGINT,
    price BIGINT,
    date_time TIMESTAMP(3),
    extra STRING
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, bidder, price, date_time, extra FROM bid;
