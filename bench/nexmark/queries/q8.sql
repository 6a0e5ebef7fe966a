-- Query 8: new users who opened an auction within 10 seconds of joining (tumbling windows).
CREATE VIEW people AS
SELECT person.id AS id, person.name AS name, tumble(interval '10 seconds') AS window
FROM nexmark WHERE person IS NOT NULL GROUP BY 1, 2, 3;
CREATE VIEW sellers AS
SELECT auction.seller AS seller, tumble(interval '10 seconds') AS window
FROM nexmark WHERE auction IS NOT NULL GROUP BY 1, 2;
INSERT INTO sink
SELECT P.id, P.name, P.window.start AS starttime
FROM people AS P JOIN sellers AS A ON P.id = A.seller AND P.window = A.window;
