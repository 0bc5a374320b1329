import type { DataSource } from "typeorm";
import { IdempotencyKey } from "@platform/contracts";
import { ApiError } from "@platform/http";
import { Batcher } from "@platform/runtime";

interface Scope {
  organizationId: string;
  key: string;
  endpoint: string;
}

/** As long as the services keep a key's answer (contract: "within 24 hours"). */
export const IDEMPOTENCY_SCOPE_TTL_MS = 24 * 3_600_000;

/** The keyed endpoints (contract, "Idempotency") by their normalized path under /api/v1. */
const KEYED: ReadonlyMap<string, string> = new Map([
  ["/api/v1/messages", "messages"],
  ["/api/v1/messages/", "messages"],
  ["/api/v1/templates/send", "templates/send"],
  ["/api/v1/templates/send/", "templates/send"],
]);

/**
 * A well-formed `Idempotency-Key` header. A keyed request the organization's plan does not cover goes to its service
 * all the same when it has one, marked as refused: the key's first answer is answered again whatever the plan is now,
 * and 402 becomes the first answer when there was none (contract, Idempotency: "the first answer again, status
 * included"). Without a key (or with a malformed one) the gateway answers 402 itself.
 */
export function isIdempotencyKey(key: string | string[] | undefined): key is string {
  return typeof key === "string" && IdempotencyKey.safeParse(key).success;
}

/** The keyed endpoint a request is for, or undefined (not a keyed POST). `path` is lower-case, slashes collapsed. */
export function keyedEndpoint(method: string | undefined, path: string): string | undefined {
  return method === "POST" ? KEYED.get(path) : undefined;
}

/**
 * An `Idempotency-Key` is scoped to the organization (contract, "Idempotency"), while each keyed service keeps the
 * answers of its own endpoint. The gateway remembers the endpoint each key was first used on for 24 hours: the same
 * key on the other endpoint is a key used before with a different request, 422 `IDEMPOTENCY_KEY_REUSED`, and neither
 * service sees it (ADR 0021). The keyed requests of one event-loop turn share one statement (`Batcher`); requests
 * without the header cost nothing.
 */
export class IdempotencyScopes {
  private sweeper?: NodeJS.Timeout;
  private readonly batcher: Batcher<Scope, string>;

  constructor(private readonly db: DataSource) {
    this.batcher = new Batcher((_key, scopes) => this.bind(scopes), 500, 2);
  }

  /** Throws 422 when `key` was used on another endpoint of the organization within 24 hours. A malformed key is the service's to refuse. */
  async check(organizationId: string, endpoint: string, key: string | string[] | undefined): Promise<void> {
    if (!isIdempotencyKey(key)) return;
    const bound = await this.batcher.submit("scopes", { organizationId, key, endpoint });
    if (bound !== endpoint) {
      throw new ApiError("IDEMPOTENCY_KEY_REUSED", `This Idempotency-Key was used with a different request (POST /api/v1/${bound})`);
    }
  }

  /**
   * The endpoint each key is bound to, binding the new (or expired) ones to theirs, in one statement. A key twice in
   * the batch is bound by its first request; rows go in key order, so two replicas' batches lock them in one order.
   */
  private async bind(scopes: Scope[]): Promise<string[]> {
    const id = (s: { organizationId: string; key: string }) => JSON.stringify([s.organizationId, s.key]);
    const first = new Map<string, Scope>();
    for (const s of scopes) if (!first.has(id(s))) first.set(id(s), s);
    const unique = [...first.values()].sort((a, b) => (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0));
    const rows: Array<{ organization_id: string; key: string; endpoint: string }> = await this.db.query(
      `INSERT INTO gateway.idempotency_scopes AS s (organization_id, key, endpoint, expires_at)
       SELECT u.organization_id, u.key, u.endpoint, clock_timestamp() + $4 * interval '1 millisecond'
       FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u(organization_id, key, endpoint, ord) ORDER BY u.ord
       ON CONFLICT (organization_id, key) DO UPDATE SET
         endpoint = CASE WHEN s.expires_at <= clock_timestamp() THEN EXCLUDED.endpoint ELSE s.endpoint END,
         expires_at = CASE WHEN s.expires_at <= clock_timestamp() THEN EXCLUDED.expires_at ELSE s.expires_at END
       RETURNING organization_id, key, endpoint`,
      [unique.map((s) => s.organizationId), unique.map((s) => s.key), unique.map((s) => s.endpoint), IDEMPOTENCY_SCOPE_TTL_MS],
    );
    const bound = new Map(rows.map((r) => [id({ organizationId: r.organization_id, key: r.key }), r.endpoint]));
    return scopes.map((s) => bound.get(id(s)) ?? "");
  }

  /** Keys past their 24 hours, deleted in bounded steps. */
  async sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const [, n] = await this.db.query(
        `DELETE FROM gateway.idempotency_scopes WHERE ctid IN (SELECT ctid FROM gateway.idempotency_scopes WHERE expires_at <= now() LIMIT 5000)`,
      );
      total += Number(n ?? 0);
      if (Number(n ?? 0) < 5000) return total;
    }
  }

  startSweeper(everyMs = 10 * 60_000, onError: (err: Error) => void = () => undefined): void {
    this.sweeper = setInterval(() => void this.sweep().catch(onError), everyMs);
    this.sweeper.unref();
  }

  stopSweeper(): void {
    clearInterval(this.sweeper);
  }
}
