import type { MigrationInterface, QueryRunner } from "typeorm";
import { outboxTableSql } from "@platform/bus";

/**
 * The contacts schema: contacts, per-channel opt-outs, the local copies of
 * organizations (opt-out keywords) and channels (owned by messaging), the
 * inbound messages already checked for keywords, and the outbox.
 */
export class CreateContactsSchema1763760000000 implements MigrationInterface {
  name = "CreateContactsSchema1763760000000";

  async up(q: QueryRunner): Promise<void> {
    const outbox = outboxTableSql("contacts");
    for (const sql of outbox.up) await q.query(sql);

    // created_at is kept at millisecond precision: it is half of the keyset
    // cursor, and the API shows milliseconds, so the cursor round-trips exactly.
    await q.query(`CREATE TABLE contacts.contacts (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      phone text NOT NULL,
      wa_id text,
      name text,
      email text,
      created_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
      updated_at timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
      CONSTRAINT contacts_organization_phone_key UNIQUE (organization_id, phone)
    )`);
    // The keyset of GET /api/v1/contacts: (organization, createdAt, id).
    await q.query(`CREATE INDEX contacts_organization_created_idx ON contacts.contacts (organization_id, created_at, id)`);

    await q.query(`CREATE TABLE contacts.opt_outs (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      messaging_channel_id text NOT NULL,
      phone text NOT NULL,
      active boolean NOT NULL,
      source text NOT NULL CHECK (source IN ('keyword', 'api', 'manual')),
      keyword text,
      reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz,
      CONSTRAINT opt_outs_organization_channel_phone_key UNIQUE (organization_id, messaging_channel_id, phone),
      CONSTRAINT opt_outs_revoked_when_inactive CHECK (active = (revoked_at IS NULL))
    )`);
    // The contacts list asks "which channels have an active opt-out for this phone".
    await q.query(`CREATE INDEX opt_outs_active_phone_idx ON contacts.opt_outs (organization_id, phone) WHERE active`);

    await q.query(`CREATE TABLE contacts.organizations (
      id text PRIMARY KEY,
      opt_out_keywords text[] NOT NULL,
      deleted boolean NOT NULL DEFAULT false,
      source_updated_at timestamptz NOT NULL,
      synced_at timestamptz NOT NULL DEFAULT now()
    )`);

    await q.query(`CREATE TABLE contacts.channels (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      name text NOT NULL,
      phone_number text NOT NULL,
      provider_phone_number_id text NOT NULL,
      connected boolean NOT NULL,
      is_default boolean NOT NULL,
      messages_per_second integer NOT NULL,
      source_updated_at timestamptz NOT NULL,
      synced_at timestamptz NOT NULL DEFAULT now()
    )`);

    // Inbound messages whose keyword already opted the sender out: a redelivery
    // of the same message must not opt out again after a later clear.
    await q.query(`CREATE TABLE contacts.keyword_messages (
      message_id text PRIMARY KEY,
      organization_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE contacts.keyword_messages`);
    await q.query(`DROP TABLE contacts.channels`);
    await q.query(`DROP TABLE contacts.organizations`);
    await q.query(`DROP TABLE contacts.opt_outs`);
    await q.query(`DROP TABLE contacts.contacts`);
    for (const sql of outboxTableSql("contacts").down) await q.query(sql);
  }
}
