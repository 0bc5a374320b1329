import type { DataSource } from "typeorm";
import { IsNull } from "typeorm";
import { SUBJECTS } from "@platform/contracts";
import type { Bus } from "@platform/bus";
import { iso } from "@platform/db";
import { ApiError } from "@platform/http";
import { newId } from "@platform/id";
import { generateApiKey, hashApiKey, keyPrefixOf } from "../auth/api-keys";
import type { AuthCache } from "../auth/key-cache";
import { ApiKeyEntity } from "../db/entities/api-key.entity";

export class ApiKeys {
  constructor(private readonly db: DataSource, private readonly bus: Bus, private readonly cache: AuthCache) {}

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

  async list(organizationId: string) {
    await this.cache.flushUsage();
    const keys = await this.db.getRepository(ApiKeyEntity).find({ where: { organizationId }, order: { createdAt: "ASC", id: "ASC" } });
    return keys.map((k) => ({
      id: k.id,
      name: k.name,
      keyPrefix: k.keyPrefix,
      createdAt: iso(k.createdAt)!,
      lastUsedAt: iso(k.lastUsedAt),
      revokedAt: iso(k.revokedAt),
    }));
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
