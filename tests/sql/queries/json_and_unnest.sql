CREATE TABLE raw (value JSON)
WITH (connector = 'single_file', path = '$input_dir/events.json', format = 'json',
      'json.unstructured' = 'true', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = '$output_path', format = 'json', type = 'sink');
-- JSON functions and operators on an unstructured table, and unnest of a JSONPath's matches.
INSERT INTO out
SELECT json_get_int(value, 'id') AS id,
       value ->> 'user' AS "user",
       json_get_str(value, 'device', 'os') AS os,
       value ? 'tags' AS has_tags,
       unnest(extract_json(value, '$.tags[*]')) AS tag
FROM raw
WHERE json_get_int(value, 'id') < 6;
