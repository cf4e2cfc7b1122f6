-- metric-drilldown: which data an investigation read.
--
-- Memory is kept per dataset: a finding dismissed on one dataset must not suppress anything on
-- another that happens to have the same table and metric names. An investigation already records
-- the SHA-256 of every table it loaded (data_fingerprint); this adds the name of its source, when
-- it was given one (`drilldown investigate --source NAME`, the weekly review's `source`), so that
-- later versions of the same source (new rows, other contents) share memory too.
--
-- Existing rows keep everything they hold; their data_source stays null (they were not named).
-- save_investigation() is redefined to store the new column; its signature and grants are those
-- of the first migration.

alter table public.investigations
    add column if not exists data_source text check (length(data_source) between 1 and 1000);

create or replace function public.save_investigation(
    investigation json,
    hypotheses    json,
    evidence      json,
    findings      json,
    report        json,
    documents     json
)
returns boolean
language plpgsql
security definer
set search_path = public, extensions, pg_temp
as $$
declare
    new_id   uuid;
    old_hash text;
    key      text := investigation ->> 'run_id';
begin
    if key is null or investigation ->> 'content_hash' is null then
        raise exception 'save_investigation: run_id and content_hash are required'
            using errcode = '22023';
    end if;
    -- one writer per run at a time; the lock ends with the transaction
    perform pg_advisory_xact_lock(hashtextextended('drilldown.investigation:' || key, 0));
    select i.content_hash into old_hash from public.investigations i where i.run_id = key;
    if old_hash is not distinct from investigation ->> 'content_hash' then
        return false;
    end if;
    delete from public.investigations i where i.run_id = key;   -- children go by cascade

    insert into public.investigations (run_id, content_hash, created_at, metric, metric_name,
                                       table_name, baseline, comparison, question, result,
                                       data_fingerprint, data_source)
    select r.run_id, r.content_hash, r.created_at, r.metric, r.metric_name, r.table_name,
           r.baseline, r.comparison, coalesce(r.question, '{}'), coalesce(r.result, '{}'),
           coalesce(r.data_fingerprint, '{}'), r.data_source
    from json_to_record(investigation) as r(run_id text, content_hash text,
         created_at timestamptz, metric text, metric_name text, table_name text, baseline text,
         comparison text, question json, result json, data_fingerprint json, data_source text)
    returning id into new_id;

    insert into public.hypotheses (investigation_id, position, hypothesis_id, title, story, status,
                                   confidence, details)
    select new_id, r.position, r.hypothesis_id, r.title, r.story, r.status, r.confidence, r.details
    from json_to_recordset(coalesce(hypotheses, '[]')) as r(position int, hypothesis_id text,
         title text, story text, status text, confidence double precision, details json);

    insert into public.evidence (investigation_id, position, hypothesis_id, seq, tool, arguments,
                                 sql, params, result_digest, elapsed_ms, tokens, details)
    select new_id, r.position, r.hypothesis_id, r.seq, r.tool, r.arguments, r.sql, r.params,
           r.result_digest, r.elapsed_ms, r.tokens, r.details
    from json_to_recordset(coalesce(evidence, '[]')) as r(position int, hypothesis_id text,
         seq int, tool text, arguments json, sql text, params json, result_digest text,
         elapsed_ms double precision, tokens int, details json);

    insert into public.findings (investigation_id, position, finding_key, segment, category, status,
                                 claim, critique, hypothesis_id, details)
    select new_id, r.position, r.finding_key, coalesce(r.segment, '{}'), r.category, r.status,
           r.claim, r.critique, r.hypothesis_id, r.details
    from json_to_recordset(coalesce(findings, '[]')) as r(position int, finding_key text,
         segment jsonb, category text, status text, claim json, critique text,
         hypothesis_id text, details json);

    if report is not null and json_typeof(report) = 'object' then
        insert into public.reports (investigation_id, title, body_markdown, storage_path)
        select new_id, r.title, r.body_markdown, r.storage_path
        from json_to_record(report) as r(title text, body_markdown text, storage_path text);
    end if;

    insert into public.memory_documents (investigation_id, kind, content, metadata,
                                         embedding_model, embedding)
    select new_id, r.kind, r.content, coalesce(r.metadata, '{}'), r.embedding_model,
           (r.embedding)::text::extensions.vector(256)
    from json_to_recordset(coalesce(documents, '[]')) as r(kind text, content text,
         metadata jsonb, embedding_model text, embedding json);
    return true;
end
$$;
