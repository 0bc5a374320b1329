import { replaceCheckConstraint } from "@platform/db";
import type { MigrationInterface, QueryRunner } from "typeorm";

const STATES = `'pending', 'sending', 'waiting', 'sent', 'failed', 'skipped'`;

/**
 * A recipient whose send the job's cancel stopped in messaging before it reached the provider is `cancelled`: never
 * sent, counted neither `sent` nor `failed` (ADR 0018, third addendum). The check only widens.
 */
export class CancelledRecipients1764800000000 implements MigrationInterface {
  name = "CancelledRecipients1764800000000";

  async up(q: QueryRunner): Promise<void> {
    await replaceCheckConstraint(q, `"template_jobs".job_recipients`, "job_recipients_state_check", `state IN (${STATES}, 'cancelled')`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE "template_jobs".job_recipients SET state = 'pending' WHERE state = 'cancelled'`);
    await replaceCheckConstraint(q, `"template_jobs".job_recipients`, "job_recipients_state_check", `state IN (${STATES})`);
  }
}
