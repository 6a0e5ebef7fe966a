-- Query 2: selection of the bids on some auctions.
CREATE TABLE sink (
    auction BIGINT,
    price BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
