import type { EntityManager } from "typeorm";

/** Inbound messages already acted upon as keyword opt-outs (so a redelivery changes nothing). */
export class KeywordMessagesRepository {
  /** Claims the message inside the caller's transaction; false when it was handled before. */
  async claim(manager: EntityManager, organizationId: string, messageId: string): Promise<boolean> {
    const rows: unknown[] = await manager.query(
      `INSERT INTO contacts.keyword_messages (message_id, organization_id) VALUES ($1, $2)
       ON CONFLICT (message_id) DO NOTHING RETURNING message_id`,
      [messageId, organizationId],
    );
    return rows.length > 0;
  }
}
