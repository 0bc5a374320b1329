import { run, SCHEMA, type Queryable } from "./queryable";

export interface IdempotencyKeyRow {
  organization_id: string;
  key: string;
  request_hash: string;
  state: "processing" | "done";
  response_status: number | null;
  response_body: unknown;
}

/**
 * Keys live 24 hours. A `processing` key is taken over after ABANDONED_AFTER_MS, longer than any live job creation
 * (50,000 recipients take seconds): its request died before the job committed (a job commits with its answer, so
 * nothing was created), and the takeover creates it once.
 */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
export const ABANDONED_AFTER_MS = 30_000;

export const idempotencyKeysRepository = {
  /**
   * Claims the key for this request. Returns null when claimed (go ahead), or
   * the existing row when another request has it or already answered.
   */
  async claim(q: Queryable, organizationId: string, key: string, requestHash: string): Promise<IdempotencyKeyRow | null> {
    const claimed = await run(q, 
      `INSERT INTO ${SCHEMA}.idempotency_keys (organization_id, key, request_hash, state, expires_at)
       VALUES ($1, $2, $3, 'processing', clock_timestamp() + $4 * interval '1 millisecond')
       ON CONFLICT (organization_id, key) DO UPDATE SET
         request_hash = EXCLUDED.request_hash, state = 'processing', response_status = NULL, response_body = NULL,
         created_at = clock_timestamp(), expires_at = EXCLUDED.expires_at
       WHERE idempotency_keys.expires_at < clock_timestamp()
          OR (idempotency_keys.state = 'processing' AND idempotency_keys.created_at < clock_timestamp() - $5 * interval '1 millisecond'
              AND idempotency_keys.request_hash = EXCLUDED.request_hash)
       RETURNING key`,
      [organizationId, key, requestHash, IDEMPOTENCY_TTL_MS, ABANDONED_AFTER_MS],
    );
    if (claimed.length > 0) return null;
    const rows = await run(q, `SELECT * FROM ${SCHEMA}.idempotency_keys WHERE organization_id = $1 AND key = $2`, [organizationId, key]);
    // Deleted in between (a 5xx released it): treat as taken, the caller answers 409 and the client retries.
    return rows[0] ?? { organization_id: organizationId, key, request_hash: requestHash, state: "processing", response_status: null, response_body: null };
  },

  async complete(q: Queryable, organizationId: string, key: string, status: number, body: unknown): Promise<void> {
    await run(q, 
      `UPDATE ${SCHEMA}.idempotency_keys SET state = 'done', response_status = $3, response_body = $4::json WHERE organization_id = $1 AND key = $2`,
      [organizationId, key, status, JSON.stringify(body)],
    );
  },

  /** Forgets a key whose request failed in a way a retry may fix (5xx). */
  async release(q: Queryable, organizationId: string, key: string): Promise<void> {
    await run(q, `DELETE FROM ${SCHEMA}.idempotency_keys WHERE organization_id = $1 AND key = $2 AND state = 'processing'`, [organizationId, key]);
  },

  async purgeExpired(q: Queryable, limit = 1000): Promise<number> {
    const rows = await run(q, 
      `DELETE FROM ${SCHEMA}.idempotency_keys WHERE ctid IN (SELECT ctid FROM ${SCHEMA}.idempotency_keys WHERE expires_at < clock_timestamp() LIMIT $1) RETURNING 1`,
      [limit],
    );
    return rows.length;
  },
};
