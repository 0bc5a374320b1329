import { ChannelPacingEntity } from "./channel-pacing.entity";
import { ChannelEntity } from "./channel.entity";
import { ConversationEntity } from "./conversation.entity";
import { IdempotencyKeyEntity } from "./idempotency-key.entity";
import { MessageEntity } from "./message.entity";
import { ServiceWindowEntity } from "./service-window.entity";

export { ChannelEntity, ChannelPacingEntity, ConversationEntity, IdempotencyKeyEntity, MessageEntity, ServiceWindowEntity };
export const entities = [ChannelEntity, ChannelPacingEntity, ConversationEntity, IdempotencyKeyEntity, MessageEntity, ServiceWindowEntity];
