export { createProviderClient } from "./client";
export type { ProviderClient, ProviderClientOptions, SendTextInput, SendTemplateInput } from "./client";
export { buildTextBody, buildTemplateBody, toProviderDigits } from "./bodies";
export type {
  ButtonParameter,
  HeaderFormat,
  HeaderMedia,
  HeaderParameter,
  MessageBody,
  TemplateComponent,
  TemplateMessageBody,
  TemplateMessageInput,
  TemplateRef,
  TextMessageBody,
  TextMessageInput,
} from "./bodies";
export { classifyResponse, CONNECTION_LOST_CODE, THROUGHPUT_ERROR_CODE, UNREADABLE_SUCCESS_CODE } from "./result";
export type { ProviderFailure, ProviderResult, ProviderSuccess } from "./result";
