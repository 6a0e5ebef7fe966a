-- Query 4: average closing price per category: per category, the average of each auction's
-- maximum valid bid, an updating result (as in Flink's q4). The maximum of an open auction
-- changes, so the average retracts what it counted before: the join, the maxima (as signed
-- changes, from the retracting aggregate) and the average run in one query.
INSERT INTO sink
SELECT Q.category, avg(Q.final) AS avg_price
FROM (
    SELECT A.auction.id AS id, A.auction.category AS category, max(B.bid.price) AS final
    FROM nexmark AS A JOIN nexmark AS B ON A.auction.id = B.bid.auction
    WHERE B.bid.datetime BETWEEN A.auction.datetime AND A.auction.expires
    GROUP BY A.auction.id, A.auction.category
) AS Q
GROUP BY Q.category;
