import { IdempotencyKeyEntity } from "./idempotency-key.entity";
import { JobRecipientEntity } from "./job-recipient.entity";
import { JobEntity } from "./job.entity";
import { TemplateEntity } from "./template.entity";

export { IdempotencyKeyEntity, JobEntity, JobRecipientEntity, TemplateEntity };
export const entities = [TemplateEntity, JobEntity, JobRecipientEntity, IdempotencyKeyEntity];
