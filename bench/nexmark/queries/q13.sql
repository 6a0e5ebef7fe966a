-- Query 13: bounded side input join (bids against a static table of auction descriptions).
-- NOT YET: the engine has no lookup/static tables to join a stream with.
INSERT INTO sink
SELECT B.bid.auction, B.bid.bidder, B.bid.price, B.bid.datetime, S.value
FROM nexmark AS B JOIN side_input AS S ON B.bid.auction % 10000 = S.key;
