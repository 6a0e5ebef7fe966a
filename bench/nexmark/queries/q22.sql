-- Query 22: the directories of each bid's URL.
INSERT INTO sink
SELECT bid.auction, bid.bidder, bid.price, bid.channel,
       split_part(bid.url, '/', 4) AS dir1,
       split_part(bid.url, '/', 5) AS dir2,
       split_part(bid.url, '/', 6) AS dir3
FROM nexmark WHERE bid IS NOT NULL;
