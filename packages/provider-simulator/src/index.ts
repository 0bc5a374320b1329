export { startSimulator } from "./simulator";
export type {
  InjectInboundInput,
  InjectStatusInput,
  InjectTemplateStatusInput,
  RecordedRequest,
  SimLogEntry,
  SimMode,
  Simulator,
  SimulatorOptions,
  StatusDelaysMs,
} from "./simulator";
export { signBody } from "./webhook-sender";
export { startSignedWebhookReceiver, type SignedWebhookReceiver } from "./webhook-receiver";
export { statusesBody, UNDELIVERABLE } from "./payloads";
export type {
  MessageStatus,
  MessagesChangeValue,
  StatusError,
  TemplateEvent,
  TemplateStatusChangeValue,
  WebhookBody,
  WebhookChange,
  WebhookInboundMessage,
  WebhookStatus,
} from "./payloads";
