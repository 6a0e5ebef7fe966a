-- Query 4: average closing price per category.
-- NOT YET: it averages, per category, the maximum bid of each auction, an aggregate over an
-- updating aggregate (the maximum of an open auction changes), which the engine refuses.
INSERT INTO sink
SELECT Q.category, avg(Q.final) AS avg_price
FROM (
    SELECT A.auction.id AS id, A.auction.category AS category, max(B.bid.price) AS final
    FROM nexmark AS A JOIN nexmark AS B ON A.auction.id = B.bid.auction
    WHERE B.bid.datetime BETWEEN A.auction.datetime AND A.auction.expires
    GROUP BY A.auction.id, A.auction.category
) AS Q
GROUP BY Q.category;
