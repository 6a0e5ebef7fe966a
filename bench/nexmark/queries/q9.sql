-- Query 9: winning bids: the highest valid bid of each auction, an updating result (as in
-- Flink's and Arroyo's q9). ROW_NUMBER() = 1 without windows is an updating aggregate (as in
-- q18); over a join, the join runs as a query of its own writing into a stage that the
-- aggregate reads (Spark runs a join in append mode only, an aggregate in update mode only).
INSERT INTO sink
SELECT id, price FROM (
    SELECT A.auction.id AS id, B.bid.price AS price,
           ROW_NUMBER() OVER (PARTITION BY A.auction.id ORDER BY B.bid.price DESC) AS rownum
    FROM nexmark AS A JOIN nexmark AS B ON A.auction.id = B.bid.auction
    WHERE B.bid.datetime BETWEEN A.auction.datetime AND A.auction.expires
) AS Q WHERE rownum <= 1;
