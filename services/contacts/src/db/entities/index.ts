import { ChannelEntity } from "./channel.entity";
import { ContactEntity } from "./contact.entity";
import { OptOutEntity } from "./opt-out.entity";
import { OrganizationEntity } from "./organization.entity";

export { ChannelEntity, ContactEntity, OptOutEntity, OrganizationEntity };
export const entities = [ContactEntity, OptOutEntity, OrganizationEntity, ChannelEntity];
