import type { DataSource, EntityManager } from "typeorm";
import { DEFAULT_OPT_OUT_KEYWORDS, SUBJECTS, type Organization, type RateLimit } from "@platform/contracts";
import type { z } from "zod";
import type { CreateOrganizationRequest, UpdateOrganizationRequest } from "@platform/contracts";
import { enqueue, type Bus } from "@platform/bus";
import { iso } from "@platform/db";
import { ApiError } from "@platform/http";
import { newId } from "@platform/id";
import type { AuthCache } from "../auth/key-cache";
import { readInCreationOrder } from "../db/created-order";
import { OrganizationEntity } from "../db/entities/organization.entity";

export class Organizations {
  constructor(
    private readonly db: DataSource,
    private readonly bus: Bus,
    private readonly defaults: RateLimit,
    private readonly cache: AuthCache,
  ) {}

  toDto(o: OrganizationEntity): Organization {
    return {
      id: o.id,
      name: o.name,
      plan: o.plan,
      rateLimit: { perSecond: o.rateLimitPerSecond ?? this.defaults.perSecond, burst: o.rateLimitBurst ?? this.defaults.burst },
      optOutKeywords: o.optOutKeywords ?? DEFAULT_OPT_OUT_KEYWORDS,
      createdAt: iso(o.createdAt)!,
      updatedAt: iso(o.updatedAt)!,
    };
  }

  async create(input: z.infer<typeof CreateOrganizationRequest>): Promise<Organization> {
    const now = new Date();
    const org = Object.assign(new OrganizationEntity(), {
      id: newId("organization"),
      name: input.name,
      plan: input.plan,
      rateLimitPerSecond: input.rateLimit?.perSecond ?? null,
      rateLimitBurst: input.rateLimit?.burst ?? null,
      optOutKeywords: input.optOutKeywords ? distinctKeywords(input.optOutKeywords) : null,
      createdAt: now,
      updatedAt: now,
    });
    await this.db.transaction(async (m) => {
      await m.save(org);
      await this.announce(m, org);
    });
    return this.toDto(org);
  }

  async get(id: string): Promise<OrganizationEntity> {
    const org = await this.db.getRepository(OrganizationEntity).findOneBy({ id });
    if (!org) throw ApiError.notFound("Organization");
    return org;
  }

  async update(id: string, input: z.infer<typeof UpdateOrganizationRequest>): Promise<Organization> {
    const org = await this.db.transaction(async (m) => {
      const found = await m.getRepository(OrganizationEntity).findOne({ where: { id }, lock: { mode: "pessimistic_write" } });
      if (!found) throw ApiError.notFound("Organization");
      if (input.name !== undefined) found.name = input.name;
      if (input.plan !== undefined) found.plan = input.plan;
      if (input.rateLimit !== undefined) {
        found.rateLimitPerSecond = input.rateLimit?.perSecond ?? null;
        found.rateLimitBurst = input.rateLimit?.burst ?? null;
      }
      if (input.optOutKeywords !== undefined) found.optOutKeywords = input.optOutKeywords && distinctKeywords(input.optOutKeywords);
      found.updatedAt = new Date();
      await m.save(found);
      await this.announce(m, found);
      return found;
    });
    // In force when this answer leaves: this replica's cached plan and limit are dropped here, before answering (a
    // send right after a downgrade is refused); every other replica drops them on the broadcast, within a moment.
    // The TTL is only the safety net.
    this.cache.evictOrganization(id);
    this.bus.broadcast(SUBJECTS.organizationChanged, { organizationId: id });
    return this.toDto(org);
  }

  /** Other services keep a copy (keyword lists, plans): the fact goes out through the outbox. */
  private async announce(m: EntityManager, org: OrganizationEntity): Promise<void> {
    const dto = this.toDto(org);
    await enqueue(m, "gateway", [
      { subject: SUBJECTS.organizationUpserted.subject, msgId: `org:${org.id}:${org.updatedAt.getTime()}`, payload: { ...dto, deleted: false } },
    ]);
  }

  async list(limit: number, after?: { createdAt: string; id: string }): Promise<OrganizationEntity[]> {
    return readInCreationOrder(this.db.getRepository(OrganizationEntity).createQueryBuilder("o"), "o", limit, after);
  }
}

/** Keywords match whole messages in lower case: a list keeps each once, as first written (`STOP`, `stop` → `STOP`). */
function distinctKeywords(keywords: string[]): string[] {
  const seen = new Set<string>();
  return keywords.filter((k) => {
    const key = k.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
