import { run, SCHEMA, type Queryable } from "./queryable";

export interface IdempotencyKeyRow {
  organization_id: string;
  key: string;
  request_hash: string;
  state: "processing" | "done";
  response_status: number | null;
  response_body: unknown;
  /** The message this key's request creates (fixed when the key is claimed). */
  message_id: string | null;
}

/** A claim: go ahead, with the message id to create; `takenOver` when an abandoned claim's request may have created it already. */
export interface IdempotencyClaim {
  messageId: string;
  takenOver: boolean;
}

/**
 * Keys live 24 hours. A `processing` key is taken over after ABANDONED_AFTER_MS,
 * longer than any live request (its pacing wait, the provider's timeout and a
 * retry of its writes): its request died. The takeover answers the message the
 * dead request was to create when it exists, so it is safe, and a client
 * retrying with the same key waits seconds rather than minutes.
 */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
export const ABANDONED_AFTER_MS = 30_000;

export const idempotencyKeysRepository = {
  /**
   * Claims the key for this request with the id of the message it will
   * create. Returns the claim (go ahead) or the existing row when another
   * request has the key or already answered. Taking over an abandoned claim
   * keeps its message id: the dead request may have stored that message.
   */
  async claim(q: Queryable, organizationId: string, key: string, requestHash: string, messageId: string): Promise<IdempotencyClaim | IdempotencyKeyRow> {
    const claimed = await run<{ message_id: string; taken_over: boolean }>(q,
      `INSERT INTO ${SCHEMA}.idempotency_keys AS k (organization_id, key, request_hash, state, expires_at, message_id)
       VALUES ($1, $2, $3, 'processing', clock_timestamp() + $4 * interval '1 millisecond', $6)
       ON CONFLICT (organization_id, key) DO UPDATE SET
         request_hash = EXCLUDED.request_hash, state = 'processing', response_status = NULL, response_body = NULL,
         created_at = clock_timestamp(), expires_at = EXCLUDED.expires_at,
         message_id = CASE WHEN k.expires_at < clock_timestamp() THEN EXCLUDED.message_id ELSE coalesce(k.message_id, EXCLUDED.message_id) END
       WHERE k.expires_at < clock_timestamp()
          OR (k.state = 'processing' AND k.created_at < clock_timestamp() - $5 * interval '1 millisecond'
              AND k.request_hash = EXCLUDED.request_hash)
       RETURNING k.message_id, (k.message_id IS DISTINCT FROM $6) AS taken_over`,
      [organizationId, key, requestHash, IDEMPOTENCY_TTL_MS, ABANDONED_AFTER_MS, messageId],
    );
    if (claimed.length > 0) return { messageId: claimed[0].message_id, takenOver: claimed[0].taken_over };
    const rows = await run<IdempotencyKeyRow>(q, `SELECT * FROM ${SCHEMA}.idempotency_keys WHERE organization_id = $1 AND key = $2`, [organizationId, key]);
    // Deleted in between (a 5xx released it): treat as taken, the caller answers 409 and the client retries.
    return rows[0] ?? { organization_id: organizationId, key, request_hash: requestHash, state: "processing", response_status: null, response_body: null, message_id: null };
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
