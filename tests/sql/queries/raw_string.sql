CREATE TABLE words (word TEXT) WITH (connector = 'single_file', path = '$input_dir/lines.txt', format = 'raw_string', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
INSERT INTO out SELECT word, length(word) AS len, concat(word, '!') AS shout FROM words WHERE word <> 'gamma';
