import type { MigrationInterface, QueryRunner } from "typeorm";
import { outboxTableSql } from "@platform/bus";

export class Init1763769600000 implements MigrationInterface {
  name = "Init1763769600000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE gateway.organizations (
      id text PRIMARY KEY,
      name text NOT NULL,
      plan text NOT NULL CHECK (plan IN ('growth', 'starter', 'inactive')),
      rate_limit_per_second integer,
      rate_limit_burst integer,
      opt_out_keywords text[],
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX organizations_created ON gateway.organizations (created_at, id)`);
    await q.query(`CREATE TABLE gateway.api_keys (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES gateway.organizations (id) ON DELETE CASCADE,
      name text NOT NULL,
      key_hash text NOT NULL UNIQUE,
      key_prefix text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_used_at timestamptz,
      revoked_at timestamptz
    )`);
    await q.query(`CREATE INDEX api_keys_organization ON gateway.api_keys (organization_id, created_at, id)`);
    for (const sql of outboxTableSql("gateway").up) await q.query(sql);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const sql of outboxTableSql("gateway").down) await q.query(sql);
    await q.query(`DROP TABLE gateway.api_keys`);
    await q.query(`DROP TABLE gateway.organizations`);
  }
}
