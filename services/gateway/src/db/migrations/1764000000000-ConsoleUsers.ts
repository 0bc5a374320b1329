import type { MigrationInterface, QueryRunner } from "typeorm";

/** Issue 15: the console's users, invitations, sessions and sign-in throttle (ADR 0009). */
export class ConsoleUsers1764000000000 implements MigrationInterface {
  name = "ConsoleUsers1764000000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE gateway.users (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES gateway.organizations (id) ON DELETE CASCADE,
      email text NOT NULL UNIQUE,
      role text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
      password_hash text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX users_organization ON gateway.users (organization_id, created_at, id)`);
    await q.query(`CREATE TABLE gateway.invitations (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES gateway.organizations (id) ON DELETE CASCADE,
      email text NOT NULL,
      role text NOT NULL CHECK (role IN ('admin', 'member')),
      token_hash text NOT NULL UNIQUE,
      invited_by text REFERENCES gateway.users (id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      accepted_at timestamptz
    )`);
    await q.query(`CREATE TABLE gateway.sessions (
      id_hash text PRIMARY KEY,
      user_id text NOT NULL REFERENCES gateway.users (id) ON DELETE CASCADE,
      organization_id text NOT NULL REFERENCES gateway.organizations (id) ON DELETE CASCADE,
      csrf_token text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL
    )`);
    await q.query(`CREATE INDEX sessions_expiry ON gateway.sessions (expires_at)`);
    await q.query(`CREATE TABLE gateway.sign_in_attempts (
      bucket text PRIMARY KEY,
      window_start timestamptz NOT NULL,
      attempts integer NOT NULL
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE gateway.sign_in_attempts`);
    await q.query(`DROP TABLE gateway.sessions`);
    await q.query(`DROP TABLE gateway.invitations`);
    await q.query(`DROP TABLE gateway.users`);
  }
}
