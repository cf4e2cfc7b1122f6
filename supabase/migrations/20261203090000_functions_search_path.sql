-- metric-drilldown: the store's functions resolve names in the built-ins only.
--
-- A role that may create objects in `public` (Supabase grants that to its API roles) could plant
-- functions and operators there that the bodies of public.save_investigation() and
-- public.match_memory_documents() would call instead of the built-ins: a
-- public.hashtextextended(text, integer) or public.json_build_array(text, text) is a closer match
-- than the built-in, and a public.<=> on vectors is found before pgvector's. The write function
-- runs as its owner, so such a function would run with the owner's privileges.
--
-- Both functions are redefined to search pg_catalog and pg_temp only, with every table, type and
-- operator outside pg_catalog named with its schema (pgvector lives in `extensions`, as the first
-- migration installs it). Their signatures, results, owners and grants stay as they were
-- (CREATE OR REPLACE keeps the grants); public.drilldown_caller() and public.drilldown_team()
-- already search pg_catalog, pg_temp.

-- ---------------------------------------------------------------------------
-- Similarity search (as in the first migration).
-- ---------------------------------------------------------------------------
create or replace function public.match_memory_documents(
    query_embedding extensions.vector(256),
    match_count     int   default 5,
    filter          jsonb default '{}'::jsonb
)
returns table (
    id               uuid,
    investigation_id uuid,
    kind             text,
    content          text,
    metadata         jsonb,
    embedding_model  text,
    similarity       double precision
)
language sql
stable
set search_path = pg_catalog, pg_temp
set hnsw.iterative_scan = 'relaxed_order'
set hnsw.ef_search = 100
as $$
    select d.id, d.investigation_id, d.kind, d.content, d.metadata, d.embedding_model,
           1 - (d.embedding operator(extensions.<=>) query_embedding) as similarity
    from public.memory_documents d
    where d.embedding_model = coalesce(filter ->> 'embedding_model', 'wordllama/l2_supercat-256')
      -- an OR, so the plan stays an HNSW index scan (+ filter) rather than a GIN bitmap scan + sort
      and ((filter - 'embedding_model') = '{}'::jsonb or d.metadata @> (filter - 'embedding_model'))
    order by d.embedding operator(extensions.<=>) query_embedding
    limit least(greatest(match_count, 1), 200);
$$;

-- ---------------------------------------------------------------------------
-- The one write path, confined to the caller's team (as in 20261202090000_investigations_per_team).
-- ---------------------------------------------------------------------------
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
set search_path = pg_catalog, pg_temp
as $$
declare
    new_id   uuid;
    old_hash text;
    key      text := investigation ->> 'run_id';
    my_team  text := public.drilldown_team();
begin
    if my_team is null then
        raise exception 'save_investigation: role % belongs to no team (public.team_writers)',
            quote_ident(public.drilldown_caller())
            using errcode = '42501';
    end if;
    if key is null or investigation ->> 'content_hash' is null then
        raise exception 'save_investigation: run_id and content_hash are required'
            using errcode = '22023';
    end if;
    -- one writer per run at a time; the lock ends with the transaction
    perform pg_advisory_xact_lock(
        hashtextextended('drilldown.investigation:' || json_build_array(my_team, key)::text, 0));
    select i.content_hash into old_hash
    from public.investigations i where i.team = my_team and i.run_id = key;
    if old_hash is not distinct from investigation ->> 'content_hash' then
        return false;
    end if;
    -- children go by cascade
    delete from public.investigations i where i.team = my_team and i.run_id = key;

    insert into public.investigations (team, run_id, content_hash, created_at, metric,
                                       metric_name, table_name, baseline, comparison, question,
                                       result, data_fingerprint, data_source)
    select my_team, r.run_id, r.content_hash, r.created_at, r.metric, r.metric_name,
           r.table_name, r.baseline, r.comparison, coalesce(r.question, '{}'),
           coalesce(r.result, '{}'), coalesce(r.data_fingerprint, '{}'), r.data_source
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
