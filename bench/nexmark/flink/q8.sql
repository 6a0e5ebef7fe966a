-- Query 8: new users who opened an auction within 10 seconds of joining (tumbling windows).
CREATE TABLE sink (
    id BIGINT,
    name STRING,
    starttime TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

CREATE VIEW people AS
SELECT id, name, window_start, window_end
FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY id, name, window_start, window_end;

CREATE VIEW sellers AS
SELECT seller, window_start, window_end
FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY seller, window_start, window_end;

INSERT INTO sink
SELECT P.id, P.name, P.window_start AS starttime
FROM people AS P JOIN sellers AS A
    ON P.id = A.seller AND P.window_start = A.window_start AND P.window_end = A.window_end;
