// Example queries for the editor's Examples menu: each runs as it is, with no external system.

export const EXAMPLES = {
  "Impulse: every event": `CREATE TABLE impulse WITH (
    connector = 'impulse',
    event_rate = '10'
);

SELECT counter, subtask_index FROM impulse;`,

  "Nexmark: bids in dollars": `CREATE TABLE nexmark WITH (
    connector = 'nexmark',
    event_rate = '1000'
);

SELECT bid.auction, bid.bidder, bid.price * 0.908 AS euros, bid.datetime
FROM nexmark WHERE bid IS NOT NULL;`,

  "Windows: a count per tumbling second": `CREATE TABLE impulse WITH (
    connector = 'impulse',
    event_rate = '100'
);

SELECT tumble(interval '1 second') AS window, count(*) AS events, max(counter) AS last
FROM impulse
GROUP BY window;`,

  "Joins: bids of each auction, by the minute": `CREATE TABLE nexmark WITH (
    connector = 'nexmark',
    event_rate = '1000'
);

CREATE VIEW auctions AS
SELECT auction.id AS id, auction.category AS category, tumble(interval '1 minute') AS window
FROM nexmark WHERE auction IS NOT NULL GROUP BY 1, 2, 3;

CREATE VIEW bids AS
SELECT bid.auction AS auction, count(*) AS bids, tumble(interval '1 minute') AS window
FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 3;

SELECT a.category, b.bids, a.window
FROM auctions AS a JOIN bids AS b ON a.id = b.auction AND a.window = b.window;`,

  "Updating: the top bidders so far": `CREATE TABLE nexmark WITH (
    connector = 'nexmark',
    event_rate = '1000'
);

SELECT bid.bidder AS bidder, count(*) AS bids
FROM nexmark WHERE bid IS NOT NULL
GROUP BY bid.bidder;`,
};
