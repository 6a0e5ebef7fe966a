-- Query 1: currency conversion (dollars to euros).
INSERT INTO sink
SELECT bid.auction, bid.bidder, 0.908 * bid.price AS price, bid.datetime, bid.extra
FROM nexmark WHERE bid IS NOT NULL;
