-- metric-drilldown: investigation memory.
--
-- One row per investigation run (natural key run_id, content_hash for idempotent saves), its
-- hypotheses, evidence ledger, findings and report, and one memory document per investigation with
-- a 256-d embedding for "has this happened before?" searches.
--
-- Writes go through public.save_investigation() only: it replaces a run whole, in one transaction,
-- and is a no-op when the same content is already stored. The application connects as the
-- least-privilege role drilldown_writer, which may read the memory and call that function but cannot
-- insert, update or delete rows itself. Signed-in users (authenticated) may read; anon gets nothing.
--
-- After applying, give the writer a login (never commit the password):
--   alter role drilldown_writer with login password '...';
-- and set SUPABASE_DB_URL=postgresql://drilldown_writer[.<project-ref>]:<password>@<host>:5432/postgres
--
-- Embeddings from different models cannot be compared: every vector records embedding_model and
-- match_memory_documents only compares vectors of one model.

create schema if not exists extensions;
create extension if not exists vector with schema extensions;

-- ---------------------------------------------------------------------------
-- Tables
-- ---------------------------------------------------------------------------
create table if not exists public.investigations (
    id               uuid primary key default gen_random_uuid(),
    run_id           text not null unique check (length(run_id) between 1 and 200),
    content_hash     text not null,
    created_at       timestamptz not null,
    saved_at         timestamptz not null default now(),
    metric           text not null,
    metric_name      text,
    table_name       text not null,
    baseline         text not null,
    comparison       text not null,
    -- json, not jsonb: the documents keep their key order (segment columns read as written)
    question         json not null default '{}'::json,
    result           json not null default '{}'::json,
    data_fingerprint json not null default '{}'::json
);
create index if not exists investigations_created_idx on public.investigations (created_at desc);
create index if not exists investigations_metric_idx on public.investigations (metric, created_at desc);

create table if not exists public.hypotheses (
    id               uuid primary key default gen_random_uuid(),
    investigation_id uuid not null references public.investigations (id) on delete cascade,
    position         int  not null,
    hypothesis_id    text,
    title            text,
    story            text,
    status           text not null check (status in ('confirmed', 'ruled_out', 'inconclusive')),
    confidence       double precision check (confidence between 0 and 1),
    details          json not null,
    unique (investigation_id, position)
);

create table if not exists public.evidence (
    id               uuid primary key default gen_random_uuid(),
    investigation_id uuid not null references public.investigations (id) on delete cascade,
    position         int  not null,
    hypothesis_id    text,
    seq              int,
    tool             text,
    arguments        json,
    sql              text,
    params           json,
    result_digest    text,
    elapsed_ms       double precision,
    tokens           int,
    details          json not null,
    unique (investigation_id, position)
);

create table if not exists public.findings (
    id               uuid primary key default gen_random_uuid(),
    investigation_id uuid not null references public.investigations (id) on delete cascade,
    position         int  not null,
    finding_key      text not null,
    segment          jsonb not null default '{}'::jsonb,
    category         text,
    status           text not null check (status in ('accepted', 'dismissed')),
    claim            json,
    critique         text,
    hypothesis_id    text,
    details          json not null,
    unique (investigation_id, position),
    unique (investigation_id, finding_key)
);
create index if not exists findings_dismissed_idx on public.findings (investigation_id)
    where status = 'dismissed';

create table if not exists public.reports (
    id               uuid primary key default gen_random_uuid(),
    investigation_id uuid not null unique references public.investigations (id) on delete cascade,
    title            text not null,
    body_markdown    text not null,
    storage_path     text
);

create table if not exists public.memory_documents (
    id               uuid primary key default gen_random_uuid(),
    investigation_id uuid not null references public.investigations (id) on delete cascade,
    kind             text not null default 'investigation_summary'
                     check (kind in ('investigation_summary', 'hypothesis', 'finding', 'report')),
    content          text not null,
    metadata         jsonb not null default '{}'::jsonb,
    embedding_model  text not null,
    embedding        extensions.vector(256) not null,
    unique (investigation_id, kind, embedding_model)
);
create index if not exists memory_documents_investigation_idx
    on public.memory_documents (investigation_id);
create index if not exists memory_documents_embedding_hnsw
    on public.memory_documents using hnsw (embedding extensions.vector_cosine_ops)
    with (m = 16, ef_construction = 64);

-- ---------------------------------------------------------------------------
-- Similarity search: (query_embedding, match_count, filter), the shape Supabase's docs use.
-- filter: "embedding_model" (required in practice; vectors of other models are never compared) and
-- any other keys matched by jsonb containment on metadata, e.g. {"metric": "sum(revenue)"}.
-- SECURITY INVOKER: row-level security applies to the caller.
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
set search_path = public, extensions
set hnsw.iterative_scan = 'relaxed_order'
set hnsw.ef_search = 100
as $$
    select d.id, d.investigation_id, d.kind, d.content, d.metadata, d.embedding_model,
           1 - (d.embedding <=> query_embedding) as similarity
    from public.memory_documents d
    where d.embedding_model = coalesce(filter ->> 'embedding_model', 'wordllama/l2_supercat-256')
      -- an OR, so the plan stays an HNSW index scan (+ filter) rather than a GIN bitmap scan + sort
      and ((filter - 'embedding_model') = '{}'::jsonb or d.metadata @> (filter - 'embedding_model'))
    order by d.embedding <=> query_embedding
    limit least(greatest(match_count, 1), 200);
$$;

-- ---------------------------------------------------------------------------
-- The one write path. Arguments are JSON rows prepared by the application (tasks/store).
-- Returns false when the run is already stored with the same content_hash (nothing written),
-- true when it was written (a run stored with other content is replaced whole).
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
                                       data_fingerprint)
    select r.run_id, r.content_hash, r.created_at, r.metric, r.metric_name, r.table_name,
           r.baseline, r.comparison, coalesce(r.question, '{}'), coalesce(r.result, '{}'),
           coalesce(r.data_fingerprint, '{}')
    from json_to_record(investigation) as r(run_id text, content_hash text,
         created_at timestamptz, metric text, metric_name text, table_name text, baseline text,
         comparison text, question json, result json, data_fingerprint json)
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

-- ---------------------------------------------------------------------------
-- Roles, row-level security and grants
-- ---------------------------------------------------------------------------
do $$
begin
    if not exists (select 1 from pg_roles where rolname = 'drilldown_writer') then
        create role drilldown_writer nologin noinherit;
    end if;
end
$$;

alter table public.investigations   enable row level security;
alter table public.hypotheses       enable row level security;
alter table public.evidence         enable row level security;
alter table public.findings         enable row level security;
alter table public.reports          enable row level security;
alter table public.memory_documents enable row level security;

do $$
declare
    t text;
begin
    foreach t in array array['investigations', 'hypotheses', 'evidence', 'findings', 'reports',
                             'memory_documents']
    loop
        execute format('drop policy if exists %I on public.%I', 'read ' || t, t);
        execute format('create policy %I on public.%I for select to authenticated, drilldown_writer '
                       'using (true)', 'read ' || t, t);
        -- Supabase's default privileges grant everything on new tables to anon and authenticated:
        -- take that back and grant only what each role needs.
        execute format('revoke all on public.%I from public, anon, authenticated, drilldown_writer',
                       t);
        execute format('grant select on public.%I to authenticated, drilldown_writer', t);
        execute format('grant all on public.%I to service_role', t);
    end loop;
end
$$;

grant usage on schema public, extensions to drilldown_writer;

revoke all on function public.match_memory_documents(extensions.vector, int, jsonb)
    from public, anon;
grant execute on function public.match_memory_documents(extensions.vector, int, jsonb)
    to authenticated, service_role, drilldown_writer;

revoke all on function public.save_investigation(json, json, json, json, json, json)
    from public, anon, authenticated;
grant execute on function public.save_investigation(json, json, json, json, json, json)
    to drilldown_writer, service_role;
