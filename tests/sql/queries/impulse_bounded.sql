CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1000000', message_count = '40', event_time_interval = '1 millisecond');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out SELECT count(*) AS c, sum(counter) AS total, max(subtask_index) AS max_subtask
FROM impulse GROUP BY tumble(interval '1 hour');
