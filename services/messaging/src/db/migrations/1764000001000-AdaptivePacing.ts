import type { MigrationInterface, QueryRunner } from "typeorm";

const S = `"messaging"`;

/**
 * Adaptive pacing after 130429 (ADR 0003): the rate right after the last
 * decrease and when it happened replace the fixed 60 s half-rate window.
 */
export class AdaptivePacing1764000001000 implements MigrationInterface {
  name = "AdaptivePacing1764000001000";

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.channel_pacing ADD COLUMN rate double precision, ADD COLUMN decreased_at timestamptz`);
    await q.query(`ALTER TABLE ${S}.channel_pacing DROP COLUMN slowed_until`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE ${S}.channel_pacing ADD COLUMN slowed_until timestamptz`);
    await q.query(`ALTER TABLE ${S}.channel_pacing DROP COLUMN decreased_at, DROP COLUMN rate`);
  }
}
