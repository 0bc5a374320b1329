import { rowsOf } from "@platform/db";
import type { DataSource, EntityManager } from "typeorm";
import { WebhookEntity } from "../entities";

export interface WebhookRow {
  id: string;
  organizationId: string;
  url: string;
  events: string[];
  active: boolean;
  consecutiveFailures: number;
  deactivatedAt: Date | null;
  createdAt: Date;
}

/** Tenant-scoped access to the webhooks of an organization. */
export class WebhookRepository {
  constructor(private readonly db: DataSource) {}

  private repo(manager?: EntityManager) {
    return (manager ?? this.db.manager).getRepository(WebhookEntity);
  }

  async create(row: { id: string; organizationId: string; url: string; events: string[]; secret: string }): Promise<WebhookEntity> {
    const entity = this.repo().create({ ...row, active: true, consecutiveFailures: 0, deactivatedAt: null });
    return this.repo().save(entity);
  }

  /** One page ordered by id (ids are time-sortable: creation order). */
  async listPage(organizationId: string, limit: number, afterId?: string): Promise<WebhookRow[]> {
    const qb = this.repo()
      .createQueryBuilder("w")
      .where("w.organization_id = :org", { org: organizationId })
      .orderBy("w.id", "ASC")
      .take(limit);
    if (afterId) qb.andWhere("w.id > :after", { after: afterId });
    return qb.getMany();
  }

  async find(organizationId: string, id: string): Promise<WebhookRow | null> {
    return this.repo().findOneBy({ organizationId, id });
  }

  /** The signing secret: read only to sign a delivery, never returned by the API after creation. */
  async findWithSecret(organizationId: string, id: string): Promise<(WebhookRow & { secret: string }) | null> {
    return this.repo()
      .createQueryBuilder("w")
      .addSelect("w.secret")
      .where("w.organization_id = :org AND w.id = :id", { org: organizationId, id })
      .getOne();
  }

  /**
   * Applies a change; `active: true` on an inactive webhook re-enables it and
   * resets the failure count, `active: false` deactivates it. Either way the
   * jobs it was owed are dropped when it goes inactive: it gets nothing until re-enabled.
   */
  async update(organizationId: string, id: string, change: { url?: string; events?: string[]; active?: boolean }): Promise<WebhookRow | null> {
    return this.db.transaction(async (m) => {
      const rows = rowsOf<{ id: string }>(
        await m.query(
        `UPDATE webhooks.webhooks SET
           url = COALESCE($3, url),
           events = COALESCE($4::text[], events),
           active = COALESCE($5, active),
           consecutive_failures = CASE WHEN $5 IS TRUE THEN 0 ELSE consecutive_failures END,
           deactivated_at = CASE WHEN $5 IS TRUE THEN NULL
                                 WHEN $5 IS FALSE THEN COALESCE(deactivated_at, now())
                                 ELSE deactivated_at END,
           updated_at = now()
         WHERE organization_id = $1 AND id = $2
         RETURNING id`,
          [organizationId, id, change.url ?? null, change.events ?? null, change.active ?? null],
        ),
      );
      if (rows.length === 0) return null;
      if (change.active === false) await m.query(`DELETE FROM webhooks.delivery_jobs WHERE webhook_id = $1`, [id]);
      return this.repo(m).findOneBy({ organizationId, id });
    });
  }

  /** The webhook, its pending jobs and its attempt log, in one transaction (no foreign keys cascade it: ADR 0012). */
  async delete(organizationId: string, id: string): Promise<boolean> {
    return this.db.transaction(async (m) => {
      const result = await this.repo(m).delete({ organizationId, id });
      if ((result.affected ?? 0) === 0) return false;
      await m.query(`DELETE FROM webhooks.delivery_jobs WHERE webhook_id = $1`, [id]);
      await m.query(`DELETE FROM webhooks.delivery_attempts WHERE webhook_id = $1`, [id]);
      return true;
    });
  }
}
