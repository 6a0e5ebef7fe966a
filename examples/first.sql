-- The README's first query: 600 impulse events, one a second of event time, counted per minute.
CREATE TABLE impulse WITH (
    connector = 'impulse',
    event_rate = '100000',
    message_count = '600',
    event_time_interval = '1 second'
);

SELECT tumble(interval '1 minute') AS window, count(*) AS events, sum(counter) AS total
FROM impulse
GROUP BY window;
