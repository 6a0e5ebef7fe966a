-- A bounded impulse stream: 2,000 events, one every 100 ms of event time.
CREATE TABLE impulse WITH (
    connector = 'impulse',
    event_rate = '100000',
    message_count = '2000',
    event_time_interval = '100 milliseconds'
);

-- Events per parity per 30 seconds of event time, printed as JSON lines.
SELECT tumble(interval '30 seconds') AS window,
       counter % 2 = 0 AS even,
       count(*) AS events,
       max(counter) AS last_counter
FROM impulse
GROUP BY window, even;
