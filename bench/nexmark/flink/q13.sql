-- Query 13: bounded side input join. nexmark-flink's form is a lookup join on processing
-- time (FOR SYSTEM_TIME AS OF) against a legacy file source that Flink 2 no longer has; its
-- filesystem connector is not a lookup source, so the side input is joined as a bounded table
-- (a regular inner join, which keeps each bid in state).
CREATE TABLE side_input (
    `key` BIGINT,
    `value` STRING
) WITH ('connector' = 'filesystem', 'path' = '$side_input', 'format' = 'json');

CREATE TABLE sink (
    auction BIGINT,
    bidder BIGINT,
    price BIGINT,
    date_time TIMESTAMP(3),
    `value` STRING
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT B.auction, B.bidder, B.price, B.date_time, S.`value`
FROM bid AS B JOIN side_input AS S ON MOD(B.auction, 10000) = S.`key`;
