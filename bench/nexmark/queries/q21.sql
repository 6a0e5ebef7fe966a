-- Query 21: add a channel id to each bid. Spark's regexp_extract gives '' (not NULL) when the
-- pattern does not match, hence the nullif.
INSERT INTO sink
SELECT bid.auction, bid.bidder, bid.price, bid.channel,
       CASE
           WHEN lower(bid.channel) = 'apple' THEN '0'
           WHEN lower(bid.channel) = 'google' THEN '1'
           WHEN lower(bid.channel) = 'facebook' THEN '2'
           WHEN lower(bid.channel) = 'baidu' THEN '3'
           ELSE nullif(regexp_extract(bid.url, '(&|^)channel_id=([^&]*)', 2), '')
       END AS channel_id
FROM nexmark
WHERE bid IS NOT NULL
  AND (nullif(regexp_extract(bid.url, '(&|^)channel_id=([^&]*)', 2), '') IS NOT NULL
       OR lower(bid.channel) IN ('apple', 'google', 'facebook', 'baidu'));
