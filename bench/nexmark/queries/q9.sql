-- Query 9: winning bids: the highest valid bid of each auction when it closes.
-- NOT YET: ROW_NUMBER() = 1 without windows is an updating aggregate (as in q18), and the
-- engine refuses an aggregate over a join without windows.
INSERT INTO sink
SELECT id, price FROM (
    SELECT A.auction.id AS id, B.bid.price AS price,
           ROW_NUMBER() OVER (PARTITION BY A.auction.id ORDER BY B.bid.price DESC) AS rownum
    FROM nexmark AS A JOIN nexmark AS B ON A.auction.id = B.bid.auction
    WHERE B.bid.datetime BETWEEN A.auction.datetime AND A.auction.expires
) AS Q WHERE rownum <= 1;
