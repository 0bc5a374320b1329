import type { MigrationInterface, QueryRunner } from "typeorm";
import { outboxTableSql } from "@platform/bus";

const S = `"messaging"`;

/** Channels, pacing, conversations, messages, service windows, idempotency keys and the outbox. */
export class Initial1763760000000 implements MigrationInterface {
  name = "Initial1763760000000";

  async up(q: QueryRunner): Promise<void> {
    for (const sql of outboxTableSql("messaging").up) await q.query(sql);
    await q.query(`CREATE TABLE ${S}.channels (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      name text NOT NULL,
      phone_number text NOT NULL,
      provider_phone_number_id text NOT NULL,
      connected boolean NOT NULL DEFAULT true,
      is_default boolean NOT NULL DEFAULT false,
      messages_per_second integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT channels_provider_phone_number_id_key UNIQUE (provider_phone_number_id)
    )`);
    await q.query(`CREATE INDEX channels_org_idx ON ${S}.channels (organization_id, created_at, id)`);
    await q.query(`CREATE UNIQUE INDEX channels_one_default_per_org ON ${S}.channels (organization_id) WHERE is_default`);

    // One GCRA row per channel: shared by every replica and by template jobs.
    await q.query(`CREATE TABLE ${S}.channel_pacing (
      channel_id text PRIMARY KEY REFERENCES ${S}.channels(id) ON DELETE CASCADE,
      messages_per_second integer NOT NULL,
      tat timestamptz NOT NULL DEFAULT now(),
      slowed_until timestamptz
    )`);

    await q.query(`CREATE TABLE ${S}.conversations (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      channel_id text NOT NULL,
      contact_id text NOT NULL,
      phone text NOT NULL,
      status text NOT NULL CHECK (status IN ('open', 'closed')),
      opened_at timestamptz NOT NULL,
      closed_at timestamptz,
      last_message_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    await q.query(`CREATE UNIQUE INDEX conversations_one_open ON ${S}.conversations (channel_id, contact_id) WHERE status = 'open'`);
    await q.query(`CREATE INDEX conversations_org_page ON ${S}.conversations (organization_id, created_at, id)`);
    await q.query(`CREATE INDEX conversations_idle ON ${S}.conversations (last_message_at) WHERE status = 'open'`);

    await q.query(`CREATE TABLE ${S}.messages (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      channel_id text NOT NULL,
      conversation_id text NOT NULL,
      contact_id text NOT NULL,
      phone text NOT NULL,
      direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
      type text NOT NULL,
      text text,
      button_text text,
      button_payload text,
      status text NOT NULL CHECK (status IN ('received', 'pending', 'sent', 'delivered', 'read', 'failed')),
      provider_message_id text,
      provider_timestamp timestamptz,
      template_job_id text,
      error_code text,
      error_title text,
      attempts integer NOT NULL DEFAULT 0,
      lease_until timestamptz,
      next_attempt_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    // Provider retries of an inbound batch insert nothing twice.
    await q.query(`CREATE UNIQUE INDEX messages_inbound_provider_id ON ${S}.messages (provider_message_id) WHERE direction = 'inbound'`);
    await q.query(`CREATE INDEX messages_outbound_provider_id ON ${S}.messages (provider_message_id) WHERE direction = 'outbound'`);
    await q.query(`CREATE INDEX messages_org_created ON ${S}.messages (organization_id, created_at)`);
    await q.query(`CREATE INDEX messages_stuck ON ${S}.messages (lease_until) WHERE status = 'pending'`);

    // The 24-hour window: provider timestamp of the contact's last inbound message per (channel, phone).
    await q.query(`CREATE TABLE ${S}.service_windows (
      channel_id text NOT NULL,
      phone text NOT NULL,
      last_inbound_at timestamptz NOT NULL,
      PRIMARY KEY (channel_id, phone)
    )`);

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
    for (const t of ["idempotency_keys", "service_windows", "messages", "conversations", "channel_pacing", "channels"]) {
      await q.query(`DROP TABLE ${S}.${t}`);
    }
    for (const sql of outboxTableSql("messaging").down) await q.query(sql);
  }
}
