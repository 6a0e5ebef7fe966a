-- Query 6: average selling price per seller over their last 10 closed auctions.
-- NOT YET: it needs an average OVER (PARTITION BY seller ROWS 10 PRECEDING) over each
-- auction's closing price, an updating result (the maximum changes while the auction is
-- open). A window frame over rows that change would have to retract the averages it gave;
-- the engine runs window functions over windowed input, or as a top-N, and refuses this.
INSERT INTO sink
SELECT seller, avg(final) OVER (PARTITION BY seller ORDER BY datetime ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)
FROM (
    SELECT A.auction.seller AS seller, A.auction.datetime AS datetime, max(B.bid.price) AS final
    FROM nexmark AS A JOIN nexmark AS B ON A.auction.id = B.bid.auction
    GROUP BY A.auction.id, A.auction.seller, A.auction.datetime
) AS Q;
