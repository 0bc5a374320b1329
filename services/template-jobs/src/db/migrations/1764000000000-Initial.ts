import type { MigrationInterface, QueryRunner } from "typeorm";
import { outboxTableSql } from "@platform/bus";

const S = `"template_jobs"`;

/** Templates, jobs, their recipients, idempotency keys and the outbox (docs/adr/0006-template-jobs-exactly-once.md). */
export class Initial1764000000000 implements MigrationInterface {
  name = "Initial1764000000000";

  async up(q: QueryRunner): Promise<void> {
    for (const sql of outboxTableSql("template_jobs").up) await q.query(sql);
    await q.query(`CREATE TABLE ${S}.templates (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      name text NOT NULL,
      language text NOT NULL,
      category text,
      status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'paused', 'disabled')),
      body_parameter_count integer NOT NULL,
      provider_template_id text NOT NULL,
      template_account_id text NOT NULL,
      header_format text CHECK (header_format IN ('image', 'video', 'document')),
      -- Milliseconds, as the API shows them: keyset cursors compare exactly what they carry.
      created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', clock_timestamp()),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT templates_org_provider_id_key UNIQUE (organization_id, provider_template_id)
    )`);
    await q.query(`CREATE INDEX templates_org_page ON ${S}.templates (organization_id, created_at, id)`);
    // The provider's status updates name the owning account (entry.id) and its template id.
    await q.query(`CREATE INDEX templates_provider ON ${S}.templates (template_account_id, provider_template_id)`);

    await q.query(`CREATE TABLE ${S}.jobs (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      template_id text NOT NULL REFERENCES ${S}.templates(id),
      messaging_channel_id text NOT NULL,
      status text NOT NULL CHECK (status IN ('queued', 'running', 'paused', 'completed', 'cancelled', 'failed')),
      header_media jsonb,
      recipients integer NOT NULL,
      sent integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      skipped integer NOT NULL DEFAULT 0,
      scheduled_for timestamptz,
      throttle_per_hour integer,
      next_slot_at timestamptz,
      opt_outs_checked boolean NOT NULL DEFAULT false,
      lease_owner text,
      lease_until timestamptz,
      run_after timestamptz,
      started_at timestamptz,
      completed_at timestamptz,
      failure_reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE INDEX jobs_runnable ON ${S}.jobs (created_at) WHERE status IN ('queued', 'running')`);
    await q.query(`CREATE INDEX jobs_template ON ${S}.jobs (template_id) WHERE status IN ('queued', 'running', 'paused')`);

    await q.query(`CREATE TABLE ${S}.job_recipients (
      job_id text NOT NULL REFERENCES ${S}.jobs(id) ON DELETE CASCADE,
      seq integer NOT NULL,
      phone text NOT NULL,
      contact_id text,
      body_parameters jsonb NOT NULL DEFAULT '[]',
      button_parameters jsonb NOT NULL DEFAULT '[]',
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sending', 'waiting', 'sent', 'failed', 'skipped')),
      message_id text,
      slot_at timestamptz,
      attempts integer NOT NULL DEFAULT 0,
      error_code text,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (job_id, seq)
    )`);
    await q.query(`CREATE INDEX job_recipients_open ON ${S}.job_recipients (job_id, seq) WHERE state IN ('pending', 'sending', 'waiting')`);
    await q.query(`CREATE INDEX job_recipients_message ON ${S}.job_recipients (job_id, message_id) WHERE message_id IS NOT NULL`);

    await q.query(`CREATE TABLE ${S}.idempotency_keys (
      organization_id text NOT NULL,
      key text NOT NULL,
      request_hash text NOT NULL,
      state text NOT NULL CHECK (state IN ('processing', 'done')),
      response_status integer,
      response_body jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (organization_id, key)
    )`);
    await q.query(`CREATE INDEX idempotency_keys_expiry ON ${S}.idempotency_keys (expires_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const t of ["idempotency_keys", "job_recipients", "jobs", "templates"]) await q.query(`DROP TABLE ${S}.${t}`);
    for (const sql of outboxTableSql("template_jobs").down) await q.query(sql);
  }
}
