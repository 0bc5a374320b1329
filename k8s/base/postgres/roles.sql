-- One database role per service, limited to its own schema. CloudNativePG runs this once, as superuser, in the
-- application database right after initdb (Cluster.spec.bootstrap.initdb.postInitApplicationSQLRefs); the roles get
-- LOGIN and their passwords from the Cluster's managed roles (Secrets postgres-role-<schema>). Each service creates
-- its tables and its TypeORM `migrations` table in its schema at start (under an advisory lock).
-- packages/deploy-check's image test runs this same file (with deploy.role_prefix set, to keep test roles apart).
DO $$
DECLARE
  schema_name text;
  role_name text;
  prefix text := coalesce(current_setting('deploy.role_prefix', true), '');
BEGIN
  EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
  REVOKE ALL ON SCHEMA public FROM PUBLIC;
  FOREACH schema_name IN ARRAY ARRAY['gateway', 'messaging', 'contacts', 'webhooks', 'template_jobs', 'analytics'] LOOP
    role_name := prefix || schema_name;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
      EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
    END IF;
    EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO %I', current_database(), role_name);
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I', schema_name, role_name);
    EXECUTE format('REVOKE ALL ON SCHEMA %I FROM PUBLIC', schema_name);
  END LOOP;
END
$$;
