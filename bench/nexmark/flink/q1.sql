-- Query 1: currency conversion (dollars to euros).
CREATE TABLE sink (
    auction BIGINT,
    bidder BIGINT,
    price DECIMAL(23, 3),
    date_time TIMESTAMP(3),
    extra STRING
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, bidder, 0.908 * price AS price, date_time, extra FROM bid;
