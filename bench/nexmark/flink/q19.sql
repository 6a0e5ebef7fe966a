-- Query 19: the ten highest bids of each auction (nexmark-flink's form: Flink's top-N,
-- ROW_NUMBER() <= 10, an updating result, with the rank as nexmark-flink selects it).
CREATE TABLE sink (
    auction BIGINT,
    price BIGINT,
    rank_number BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO sink
SELECT auction, price, rank_number FROM (
    SELECT auction, price,
           ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
    FROM bid
) WHERE rank_number <= 10;
