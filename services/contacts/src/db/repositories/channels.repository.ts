import type { DataSource } from "typeorm";
import type { z } from "zod";
import type { ChannelUpserted } from "@platform/contracts";
import { ChannelEntity } from "../entities/channel.entity";

export type ChannelCopy = z.infer<typeof ChannelUpserted>;

/** The local copy of messaging's channels. */
export class ChannelsRepository {
  constructor(private readonly db: DataSource) {}

  /** A channel by id, whatever its organization (callers compare the organization and answer 404). */
  async findById(id: string): Promise<ChannelEntity | null> {
    return this.db.getRepository(ChannelEntity).findOneBy({ id });
  }

  /** Stores a channel; an older copy (by the channel's own `updatedAt`) never replaces a newer one. */
  async upsert(c: ChannelCopy): Promise<void> {
    await this.db.query(
      `INSERT INTO contacts.channels AS ch
         (id, organization_id, name, phone_number, provider_phone_number_id, connected, is_default, messages_per_second, source_updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (id) DO UPDATE
         SET organization_id = EXCLUDED.organization_id, name = EXCLUDED.name, phone_number = EXCLUDED.phone_number,
             provider_phone_number_id = EXCLUDED.provider_phone_number_id, connected = EXCLUDED.connected,
             is_default = EXCLUDED.is_default, messages_per_second = EXCLUDED.messages_per_second,
             source_updated_at = EXCLUDED.source_updated_at, synced_at = now()
         WHERE ch.source_updated_at <= EXCLUDED.source_updated_at`,
      [c.id, c.organizationId, c.name, c.phoneNumber, c.providerPhoneNumberId, c.connected, c.isDefault, c.messagesPerSecond, c.updatedAt],
    );
  }
}
