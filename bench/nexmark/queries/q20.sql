-- Query 20: bids expanded with their auction, for auctions in category 10 (a join without
-- windows, its state bounded by updating_ttl).
CREATE VIEW bids AS
SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price, bid.channel AS channel,
       bid.url AS url, bid.datetime AS datetime
FROM nexmark WHERE bid IS NOT NULL;
CREATE VIEW auctions AS
SELECT auction.id AS id, auction.item_name AS item_name, auction.description AS description,
       auction.initial_bid AS initial_bid, auction.reserve AS reserve,
       auction.datetime AS datetime, auction.expires AS expires, auction.seller AS seller,
       auction.category AS category
FROM nexmark WHERE auction IS NOT NULL;
INSERT INTO sink
SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.datetime AS bid_datetime,
       A.item_name, A.description, A.initial_bid, A.reserve, A.datetime AS auction_datetime,
       A.expires, A.seller, A.category
FROM bids AS B JOIN auctions AS A ON B.auction = A.id
WHERE A.category = 10;
