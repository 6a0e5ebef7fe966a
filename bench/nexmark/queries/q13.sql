-- Query 13: bounded side input join: each bid with the row of a static table (the harness's
-- ``side_input`` lookup table, bench/nexmark_side_input.py) whose key is its auction modulo
-- 10,000. A lookup table is read whole and joined with each micro-batch, keeping no state.
INSERT INTO sink
SELECT B.bid.auction, B.bid.bidder, B.bid.price, B.bid.datetime, S.value
FROM nexmark AS B JOIN side_input AS S ON B.bid.auction % 10000 = S.key;
