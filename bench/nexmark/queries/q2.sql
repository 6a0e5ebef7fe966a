-- Query 2: selection of the bids on some auctions.
INSERT INTO sink
SELECT bid.auction, bid.price
FROM nexmark WHERE bid IS NOT NULL AND bid.auction % 123 = 0;
