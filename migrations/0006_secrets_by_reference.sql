-- Target secrets are no longer stored: literal tokens, passwords, client secrets and webhook
-- header values become {"redacted": true} placeholders, filled in from the config at delivery
-- ({"env": NAME} references stay as they are). This scrubs what earlier versions stored in rollup
-- definitions and in the outbox.
CREATE FUNCTION scrub_target_secrets(t jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE t->>'type'
    WHEN 'airflow' THEN (
      SELECT jsonb_object_agg(key, CASE
        WHEN key IN ('token', 'password', 'client_secret') AND jsonb_typeof(value) = 'string'
          THEN '{"redacted": true}'::jsonb
        ELSE value END)
      FROM jsonb_each(t))
    WHEN 'webhook' THEN jsonb_set(t, '{headers}', coalesce((
      SELECT jsonb_object_agg(key, CASE
        WHEN jsonb_typeof(value) = 'string' THEN '{"redacted": true}'::jsonb
        ELSE value END)
      FROM jsonb_each(t->'headers')), '{}'::jsonb))
    ELSE t END
$$;

-- The old definition hash was computed over the secrets: replace it too. The next start then
-- sees a changed definition and re-evaluates the untriggered periods once, which is harmless.
UPDATE rollups
SET definition = jsonb_set(definition, '{target}', scrub_target_secrets(definition->'target')),
  definition_hash = 'scrubbed'
WHERE scrub_target_secrets(definition->'target') IS DISTINCT FROM definition->'target';

UPDATE triggers SET target = scrub_target_secrets(target)
WHERE target->>'type' IN ('airflow', 'webhook')
  AND scrub_target_secrets(target) IS DISTINCT FROM target;

DROP FUNCTION scrub_target_secrets(jsonb);
