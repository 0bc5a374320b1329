import type { MigrationInterface, QueryRunner } from "typeorm";

const S = `"messaging"`;

/**
 * Template sends (rpc.messaging.template.send.v1): the send's idempotency key,
 * unique per organization, and what the retry worker needs to rebuild the
 * template body (template, header media, parameters).
 */
export class TemplateSends1764000000000 implements MigrationInterface {
  name = "TemplateSends1764000000000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.messages ADD COLUMN send_key text, ADD COLUMN template_payload jsonb`);
    await q.query(`CREATE UNIQUE INDEX messages_send_key ON ${S}.messages (organization_id, send_key) WHERE send_key IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX ${S}.messages_send_key`);
    await q.query(`ALTER TABLE ${S}.messages DROP COLUMN template_payload, DROP COLUMN send_key`);
  }
}
