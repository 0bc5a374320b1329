import { run, SCHEMA, type Queryable } from "./queryable";

export const serviceWindowsRepository = {
  /** Moves the window forward only: a late, older message never shortens it. */
  async recordInbound(q: Queryable, channelId: string, phone: string, at: Date): Promise<void> {
    await run(q, 
      `INSERT INTO ${SCHEMA}.service_windows (channel_id, phone, last_inbound_at) VALUES ($1, $2, $3)
       ON CONFLICT (channel_id, phone) DO UPDATE SET last_inbound_at = greatest(service_windows.last_inbound_at, EXCLUDED.last_inbound_at)`,
      [channelId, phone, at],
    );
  },
};
