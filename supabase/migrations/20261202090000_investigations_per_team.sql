-- metric-drilldown: each team's investigations are its own.
--
-- Several teams may share one store. Every investigation now belongs to a team, and row-level
-- security on every memory table confines each role (but the service role) to its own team's
-- rows: one team's writer can neither read another team's investigations nor replace them.
--
-- Who is in which team (public.drilldown_team()):
--   * a database role, such as a team's writer connecting directly: its row in
--     public.team_writers;
--   * a signed-in user (authenticated, through Supabase's APIs): the JWT's app_metadata.team
--     claim. app_metadata is written by the project, never by the user (user_metadata is not
--     read); a role that sets request.jwt.claims itself is not `authenticated` and gains nothing.
-- A role in neither has no team: it sees no rows and cannot save.
--
-- Investigations saved before this migration belong to the team 'default', and so does the role
-- drilldown_writer: a store that one team uses keeps working as it did. To add a team's writer
-- (drilldown_writers holds the privileges every writer needs, and belongs to no team):
--   create role drilldown_writer_growth with login password '...' in role drilldown_writers;
--   insert into public.team_writers (role_name, team) values ('drilldown_writer_growth', 'growth');
--
-- Run ids are per team: two teams asking the same question of the same data (the bundled demo,
-- one shared export) keep one investigation each, and save_investigation() finds, locks and
-- replaces only the run of the caller's team.

-- ---------------------------------------------------------------------------
-- Teams
-- ---------------------------------------------------------------------------
create table if not exists public.team_writers (
    role_name text primary key,
    team      text not null check (length(team) between 1 and 200)
);

alter table public.investigations
    add column if not exists team text check (length(team) between 1 and 200);
update public.investigations set team = 'default' where team is null;
alter table public.investigations alter column team set not null;

-- a run id is unique within its team (the first migration made it unique across the store)
alter table public.investigations drop constraint if exists investigations_run_id_key;
create unique index if not exists investigations_team_run_idx
    on public.investigations (team, run_id);

do $$
begin
    if not exists (select 1 from pg_roles where rolname = 'drilldown_writers') then
        create role drilldown_writers nologin;
    end if;
end
$$;
insert into public.team_writers (role_name, team) values ('drilldown_writer', 'default')
    on conflict (role_name) do nothing;

-- The role that runs the statement: the SET ROLE in force, else the login. A SECURITY DEFINER
-- function runs as its owner (current_user), but neither of these changes inside it, so the
-- functions below see who called them.
create or replace function public.drilldown_caller()
returns text
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    select coalesce(nullif(current_setting('role'), 'none'), session_user::text);
$$;

-- The caller's team, or null. SECURITY DEFINER so that no role needs to read team_writers.
create or replace function public.drilldown_team()
returns text
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select case
        when public.drilldown_caller() = 'authenticated' then
            nullif(current_setting('request.jwt.claims', true), '')::jsonb
                -> 'app_metadata' ->> 'team'
        else (select w.team from public.team_writers w
              where w.role_name = public.drilldown_caller())
    end;
$$;

-- ---------------------------------------------------------------------------
-- The one write path, confined to the caller's team. It runs as its owner (the writers may not
-- write rows themselves), which row-level security does not restrain: every statement below
-- names the team.
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

-- ---------------------------------------------------------------------------
-- Row-level security: a row is visible (and writable, were a role granted writes) only to its
-- team; the children follow their investigation. Roles without a policy here (anon) see
-- nothing; the service role bypasses it.
-- ---------------------------------------------------------------------------
alter table public.team_writers enable row level security;
revoke all on public.team_writers from public, anon, authenticated, drilldown_writer,
    drilldown_writers;
grant all on public.team_writers to service_role;

drop policy if exists "read investigations" on public.investigations;
drop policy if exists "own team" on public.investigations;
create policy "own team" on public.investigations
    to authenticated, drilldown_writer, drilldown_writers
    using (team = (select public.drilldown_team()))
    with check (team = (select public.drilldown_team()));

do $$
declare
    t    text;
    mine text;
begin
    foreach t in array array['hypotheses', 'evidence', 'findings', 'reports', 'memory_documents']
    loop
        mine := format('exists (select 1 from public.investigations i '
                       'where i.id = %I.investigation_id '
                       'and i.team = (select public.drilldown_team()))', t);
        execute format('drop policy if exists %I on public.%I', 'read ' || t, t);
        execute format('drop policy if exists %I on public.%I', 'own team', t);
        execute format('create policy %I on public.%I '
                       'to authenticated, drilldown_writer, drilldown_writers '
                       'using (%s) with check (%s)', 'own team', t, mine, mine);
        execute format('grant select on public.%I to drilldown_writers', t);
    end loop;
end
$$;
grant select on public.investigations to drilldown_writers;

grant usage on schema public, extensions to drilldown_writers;
revoke all on function public.drilldown_caller() from public, anon;
revoke all on function public.drilldown_team() from public, anon;
grant execute on function public.drilldown_caller(), public.drilldown_team()
    to authenticated, service_role, drilldown_writer, drilldown_writers;
grant execute on function public.match_memory_documents(extensions.vector, int, jsonb)
    to drilldown_writers;
grant execute on function public.save_investigation(json, json, json, json, json, json)
    to drilldown_writers;
