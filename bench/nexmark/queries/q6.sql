-- Query 6: average selling price per seller over their last 10 closed auctions.
-- NOT YET: it needs an OVER (PARTITION BY seller ROWS 10 PRECEDING) over an updating join,
-- which Spark cannot run on a stream and the engine refuses.
INSERT INTO sink
SELECT seller, avg(final) OVER (PARTITION BY seller ORDER BY datetime ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
    SELECT A.auction.seller AS seller, A.auction.datetime AS datetime, max(B.bid.price) AS final
    FROM nexmark AS A JOIN nexmark AS B ON A.auction.id = B.bid.auction
    GROUP BY A.auction.id, A.auction.seller, A.auction.datetime
) AS Q;
