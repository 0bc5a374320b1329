import type { MigrationInterface, QueryRunner } from "typeorm";

/**
 * Webhooks, the events they are owed (the exact body bytes, stored once per
 * event), the durable delivery jobs (first attempts and pending retries) and
 * the attempt log of the application screen.
 */
export class CreateWebhooks1763766000000 implements MigrationInterface {
  name = "CreateWebhooks1763766000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE webhooks.webhooks (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      url text NOT NULL,
      events text[] NOT NULL,
      secret text NOT NULL,
      active boolean NOT NULL DEFAULT true,
      consecutive_failures integer NOT NULL DEFAULT 0,
      deactivated_at timestamptz NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX webhooks_organization_idx ON webhooks.webhooks (organization_id, id)`);

    await q.query(`CREATE TABLE webhooks.events (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      event text NOT NULL,
      body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX events_created_idx ON webhooks.events (created_at)`);

    await q.query(`CREATE TABLE webhooks.delivery_jobs (
      id bigserial PRIMARY KEY,
      event_id text NOT NULL REFERENCES webhooks.events (id) ON DELETE CASCADE,
      webhook_id text NOT NULL REFERENCES webhooks.webhooks (id) ON DELETE CASCADE,
      organization_id text NOT NULL,
      attempt integer NOT NULL DEFAULT 1,
      due_at timestamptz NOT NULL DEFAULT now(),
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT delivery_jobs_event_webhook_key UNIQUE (event_id, webhook_id)
    )`);
    await q.query(`CREATE INDEX delivery_jobs_due_idx ON webhooks.delivery_jobs (due_at)`);
    await q.query(`CREATE INDEX delivery_jobs_webhook_idx ON webhooks.delivery_jobs (webhook_id)`);

    await q.query(`CREATE TABLE webhooks.delivery_attempts (
      id text PRIMARY KEY,
      webhook_id text NOT NULL REFERENCES webhooks.webhooks (id) ON DELETE CASCADE,
      organization_id text NOT NULL,
      event_id text NOT NULL,
      event text NOT NULL,
      attempt integer NOT NULL,
      response_status integer NULL,
      response_body text NULL,
      error text NULL,
      duration_ms integer NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX delivery_attempts_webhook_idx ON webhooks.delivery_attempts (webhook_id, id DESC)`);
    await q.query(`CREATE INDEX delivery_attempts_created_idx ON webhooks.delivery_attempts (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE webhooks.delivery_attempts`);
    await q.query(`DROP TABLE webhooks.delivery_jobs`);
    await q.query(`DROP TABLE webhooks.events`);
    await q.query(`DROP TABLE webhooks.webhooks`);
  }
}
