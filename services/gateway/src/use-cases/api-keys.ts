import type { DataSource } from "typeorm";
import { IsNull } from "typeorm";
import type { z } from "zod";
import { SUBJECTS, type ApiKeySummary, type PageQuery } from "@platform/contracts";
import type { Bus } from "@platform/bus";
import { iso } from "@platform/db";
import { ApiError, CursorCodec, positionIn, type CreatedPosition } from "@platform/http";
import { newId } from "@platform/id";
import { generateApiKey, hashApiKey, keyPrefixOf } from "../auth/api-keys";
import type { AuthCache } from "../auth/key-cache";
import { pageInCreationOrder, readInCreationOrder } from "../db/created-order";
import { ApiKeyEntity } from "../db/entities/api-key.entity";

export class ApiKeys {
  private readonly cursors: CursorCodec<CreatedPosition>;

  constructor(
    private readonly db: DataSource,
    private readonly bus: Bus,
    private readonly cache: AuthCache,
    /** Key of the cursors' HMAC, shared by every replica. */
    cursorKey: string,
  ) {
    this.cursors = new CursorCodec<CreatedPosition>(cursorKey, "api-keys");
  }

  /** The key is in this answer only; the database keeps its SHA-256. */
  async create(organizationId: string, name: string) {
    const key = generateApiKey();
    const entity = Object.assign(new ApiKeyEntity(), {
      id: newId("apiKey"),
      organizationId,
      name,
      keyHash: hashApiKey(key),
      keyPrefix: keyPrefixOf(key),
      createdAt: new Date(),
      lastUsedAt: null,
      revokedAt: null,
    });
    await this.db.getRepository(ApiKeyEntity).insert(entity);
    return { id: entity.id, name, key, createdAt: iso(entity.createdAt)! };
  }

  /** One page of the organization's keys in creation order (contract section 3: the /api/v1 cursor pagination). */
  async list(organizationId: string, q: PageQuery): Promise<{ items: Array<z.infer<typeof ApiKeySummary>>; nextCursor?: string }> {
    // Decoded first: a cursor this service did not issue is 400 before any work.
    const after = q.cursor !== undefined ? this.cursors.decode(q.cursor, positionIn(organizationId)) : undefined;
    await this.cache.flushUsage();
    const rows = await readInCreationOrder(this.db.getRepository(ApiKeyEntity).createQueryBuilder("k").where("k.organization_id = :organizationId", { organizationId }), "k", q.limit, after);
    return pageInCreationOrder(rows, q.limit, this.cursors, (k) => ({
      id: k.id,
      name: k.name,
      keyPrefix: k.keyPrefix,
      createdAt: iso(k.createdAt)!,
      lastUsedAt: iso(k.lastUsedAt),
      revokedAt: iso(k.revokedAt),
    }), organizationId);
  }

  /** Refused everywhere within a second: evicted here at once and broadcast to every replica. */
  async revoke(organizationId: string, keyId: string): Promise<void> {
    const repo = this.db.getRepository(ApiKeyEntity);
    const key = await repo.findOneBy({ id: keyId, organizationId });
    if (!key) throw ApiError.notFound("API key");
    if (!key.revokedAt) await repo.update({ id: keyId, organizationId, revokedAt: IsNull() }, { revokedAt: new Date() });
    this.cache.evictKey(keyId);
    this.bus.broadcast(SUBJECTS.apiKeyRevoked, { keyId, organizationId });
  }
}
