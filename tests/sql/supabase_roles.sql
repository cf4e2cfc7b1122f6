-- Test-only bootstrap: the roles every Supabase project already has. Applied before the migrations
-- on the local test Postgres (tests/conftest_pg.py). Never run it against Supabase.
do $$
begin
    if not exists (select 1 from pg_roles where rolname = 'anon') then
        create role anon nologin noinherit;
    end if;
    if not exists (select 1 from pg_roles where rolname = 'authenticated') then
        create role authenticated nologin noinherit;
    end if;
    if not exists (select 1 from pg_roles where rolname = 'service_role') then
        create role service_role nologin noinherit bypassrls;
    end if;
end
$$;
-- let the connecting superuser switch into them (SET ROLE) in tests
grant anon, authenticated, service_role to current_user;
