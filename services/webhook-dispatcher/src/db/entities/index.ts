export { WebhookEntity } from "./webhook.entity";
export { StoredEventEntity } from "./stored-event.entity";
export { DeliveryJobEntity } from "./delivery-job.entity";
export { DeliveryAttemptEntity } from "./delivery-attempt.entity";
export { DispatcherEntity } from "./dispatcher.entity";
