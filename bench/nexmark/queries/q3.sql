-- Query 3: local item suggestion: sellers in some states with an auction in category 10.
-- A join without windows (its state bounded by updating_ttl).
CREATE VIEW person AS
SELECT person.id AS id, person.name AS name, person.city AS city, person.state AS state
FROM nexmark WHERE person IS NOT NULL;
CREATE VIEW auction AS
SELECT auction.id AS id, auction.seller AS seller, auction.category AS category
FROM nexmark WHERE auction IS NOT NULL;
INSERT INTO sink
SELECT P.name, P.city, P.state, A.id
FROM auction AS A JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
