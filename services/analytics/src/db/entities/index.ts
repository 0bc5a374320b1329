import { BucketEntity } from "./bucket.entity";
import { MessageEntity } from "./message.entity";

export { BucketEntity, MessageEntity };
export const entities = [MessageEntity, BucketEntity];
