import { replaceCheckConstraint } from "@platform/db";
import type { MigrationInterface, QueryRunner } from "typeorm";

const STATUSES = `'received', 'pending', 'sent', 'delivered', 'read', 'failed'`;

/**
 * A template send its job's cancel ended before it reached the provider is `cancelled`, not `failed` (ADR 0018, third
 * addendum): `message.failed` is the provider's failure. The check only widens.
 */
export class CancelledTemplateSends1764800000000 implements MigrationInterface {
  name = "CancelledTemplateSends1764800000000";

  async up(q: QueryRunner): Promise<void> {
    await replaceCheckConstraint(q, `"messaging".messages`, "messages_status_check", `status IN (${STATUSES}, 'cancelled')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE "messaging".messages SET status = 'failed' WHERE status = 'cancelled'`);
    await replaceCheckConstraint(q, `"messaging".messages`, "messages_status_check", `status IN (${STATUSES})`);
  }
}
