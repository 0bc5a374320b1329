import type { z } from "zod";
import type {
  AnalyticsQuery as AnalyticsQuerySchema,
  AnalyticsResult as AnalyticsResultSchema,
  Contact as ContactSchema,
  ContactList as ContactListSchema,
  Conversation as ConversationSchema,
  ConversationList as ConversationListSchema,
  MessageRecord as MessageRecordSchema,
  MessageResponse as MessageResponseSchema,
  OptOutRequest as OptOutRequestSchema,
  OptOutState as OptOutStateSchema,
  PageQuery as PageQuerySchema,
  PingResponse as PingResponseSchema,
  SendMessageRequest as SendMessageRequestSchema,
  Template as TemplateSchema,
  TemplateJob as TemplateJobSchema,
  TemplateList as TemplateListSchema,
  TemplateSendJobRequest as TemplateSendJobRequestSchema,
} from "@platform/contracts";
import { PageIterator } from "./pagination";
import { Transport, type Answer, type RequestOptions, type SendOptions, type TransportOptions } from "./transport";

// Every type is the contracts' own: requests are what the schema accepts (z.input), answers what it produces (z.output).
export type PingResult = z.output<typeof PingResponseSchema>;
export type SendMessageRequest = z.input<typeof SendMessageRequestSchema>;
export type Message = z.output<typeof MessageResponseSchema>;
/** A stored message, inbound or outbound, whole (`GET /api/v1/messages/{messageId}`). */
export type MessageRecord = z.output<typeof MessageRecordSchema>;
export type Conversation = z.output<typeof ConversationSchema>;
export type ConversationList = z.output<typeof ConversationListSchema>;
export type Contact = z.output<typeof ContactSchema>;
export type ContactList = z.output<typeof ContactListSchema>;
export type OptOutRequest = z.input<typeof OptOutRequestSchema>;
export type OptOutState = z.output<typeof OptOutStateSchema>;
export type AnalyticsQuery = z.input<typeof AnalyticsQuerySchema>;
export type AnalyticsResult = z.output<typeof AnalyticsResultSchema>;
export type Template = z.output<typeof TemplateSchema>;
export type TemplateList = z.output<typeof TemplateListSchema>;
export type TemplateSendRequest = z.input<typeof TemplateSendJobRequestSchema>;
export type TemplateJob = z.output<typeof TemplateJobSchema>;
/** `limit` (1 to 100, default 25) and `cursor` of every list endpoint. */
export type PageQuery = Partial<z.output<typeof PageQuerySchema>>;

export type ClientOptions = TransportOptions;

/**
 * The typed client of `/api/v1`.
 *
 * ```ts
 * const client = new MessagingClient({ baseUrl: "https://api.example.com", apiKey: process.env.API_KEY! });
 * const message = await client.messages.send({ to: "+15550001111", text: "Hello" });
 * for await (const contact of client.contacts.list()) console.log(contact.phone);
 * ```
 */
export class MessagingClient {
  /** The low-level transport (retries, idempotency keys, errors) the resources use. */
  readonly transport: Transport;
  readonly messages: Messages;
  readonly conversations: Conversations;
  readonly contacts: Contacts;
  readonly optOuts: OptOuts;
  readonly analytics: Analytics;
  readonly templates: Templates;

  constructor(options: ClientOptions) {
    this.transport = new Transport(options);
    this.messages = new Messages(this.transport);
    this.conversations = new Conversations(this.transport);
    this.contacts = new Contacts(this.transport);
    this.optOuts = new OptOuts(this.transport);
    this.analytics = new Analytics(this.transport);
    this.templates = new Templates(this.transport);
  }

  /** `GET /api/v1/ping`: checks the key; answers its organization. */
  async ping(options?: RequestOptions): Promise<PingResult> {
    return (await this.transport.request<PingResult>({ method: "GET", path: "/api/v1/ping", safeToRepeat: true, options })).data;
  }
}

const enc = encodeURIComponent;

function listPage<T>(transport: Transport, path: string, query: PageQuery | undefined, options?: RequestOptions): Promise<T> {
  return transport.request<T>({ method: "GET", path, query: { limit: query?.limit, cursor: query?.cursor }, safeToRepeat: true, options }).then((a) => a.data);
}

class Messages {
  constructor(private readonly t: Transport) {}

  /**
   * `POST /api/v1/messages`. Carries an `Idempotency-Key` (`options.idempotencyKey`, or a new UUID), the same on
   * every retry, so a retried send is delivered once. `sendWithAnswer` also tells whether the answer was replayed.
   */
  async send(body: SendMessageRequest, options?: SendOptions): Promise<Message> {
    return (await this.sendWithAnswer(body, options)).data;
  }

  sendWithAnswer(body: SendMessageRequest, options?: SendOptions): Promise<Answer<Message>> {
    const idempotencyKey = options?.idempotencyKey ?? this.t.newIdempotencyKey();
    return this.t.request<Message>({ method: "POST", path: "/api/v1/messages", body, idempotencyKey, safeToRepeat: true, options });
  }

  /** `GET /api/v1/messages/{messageId}`: the stored message whole (what a webhook summarized over 256 KB left out). */
  async get(messageId: string, options?: RequestOptions): Promise<MessageRecord> {
    return (await this.t.request<MessageRecord>({ method: "GET", path: `/api/v1/messages/${enc(messageId)}`, safeToRepeat: true, options })).data;
  }
}

class Conversations {
  constructor(private readonly t: Transport) {}

  /** Every conversation, page by page: `for await (const c of client.conversations.list())`. */
  list(query?: PageQuery, options?: RequestOptions): PageIterator<Conversation> {
    return new PageIterator((cursor) => this.listPage({ limit: query?.limit, cursor }, options), query?.cursor);
  }

  /** `GET /api/v1/conversations`: one page. */
  listPage(query?: PageQuery, options?: RequestOptions): Promise<ConversationList> {
    return listPage(this.t, "/api/v1/conversations", query, options);
  }
}

class Contacts {
  constructor(private readonly t: Transport) {}

  /** Every contact, ordered by `createdAt` then `id`: `for await (const c of client.contacts.list())`. */
  list(query?: PageQuery, options?: RequestOptions): PageIterator<Contact> {
    return new PageIterator((cursor) => this.listPage({ limit: query?.limit, cursor }, options), query?.cursor);
  }

  /** `GET /api/v1/contacts`: one page. */
  listPage(query?: PageQuery, options?: RequestOptions): Promise<ContactList> {
    return listPage(this.t, "/api/v1/contacts", query, options);
  }
}

class OptOuts {
  constructor(private readonly t: Transport) {}

  /** `POST /api/v1/opt-outs` with `action: "set"`: creates or reactivates the opt-out of (channel, phone). */
  set(body: Omit<OptOutRequest, "action">, options?: RequestOptions): Promise<OptOutState> {
    return this.update({ ...body, action: "set" }, options);
  }

  /** `POST /api/v1/opt-outs` with `action: "clear"`: revokes it (idempotent). */
  clear(body: Omit<OptOutRequest, "action" | "reason">, options?: RequestOptions): Promise<OptOutState> {
    return this.update({ ...body, action: "clear" }, options);
  }

  /** `POST /api/v1/opt-outs` as is. */
  async update(body: OptOutRequest, options?: RequestOptions): Promise<OptOutState> {
    return (await this.t.request<OptOutState>({ method: "POST", path: "/api/v1/opt-outs", body, safeToRepeat: true, options })).data;
  }
}

class Analytics {
  constructor(private readonly t: Transport) {}

  /** `GET /api/v1/analytics`: outbound counts by status and the three rates for `[startDate, endDate]`. */
  async get(query: AnalyticsQuery, options?: RequestOptions): Promise<AnalyticsResult> {
    return (await this.t.request<AnalyticsResult>({ method: "GET", path: "/api/v1/analytics", query, safeToRepeat: true, options })).data;
  }
}

class Templates {
  constructor(private readonly t: Transport) {}

  /** Every template: `for await (const t of client.templates.list())`. */
  list(query?: PageQuery, options?: RequestOptions): PageIterator<Template> {
    return new PageIterator((cursor) => this.listPage({ limit: query?.limit, cursor }, options), query?.cursor);
  }

  /** `GET /api/v1/templates`: one page. */
  listPage(query?: PageQuery, options?: RequestOptions): Promise<TemplateList> {
    return listPage(this.t, "/api/v1/templates", query, options);
  }

  /** `POST /api/v1/templates/send`: queues a bulk send job, with an `Idempotency-Key` reused across retries. */
  async send(body: TemplateSendRequest, options?: SendOptions): Promise<TemplateJob> {
    return (await this.sendWithAnswer(body, options)).data;
  }

  sendWithAnswer(body: TemplateSendRequest, options?: SendOptions): Promise<Answer<TemplateJob>> {
    const idempotencyKey = options?.idempotencyKey ?? this.t.newIdempotencyKey();
    return this.t.request<TemplateJob>({ method: "POST", path: "/api/v1/templates/send", body, idempotencyKey, safeToRepeat: true, options });
  }

  /** `GET /api/v1/templates/send/{jobId}`: the job and its progress. */
  async getJob(jobId: string, options?: RequestOptions): Promise<TemplateJob> {
    return (await this.t.request<TemplateJob>({ method: "GET", path: `/api/v1/templates/send/${enc(jobId)}`, safeToRepeat: true, options })).data;
  }

  /** `POST /api/v1/templates/send/{jobId}/cancel`: stops the job (a finished one is answered unchanged). */
  async cancelJob(jobId: string, options?: RequestOptions): Promise<TemplateJob> {
    return (await this.t.request<TemplateJob>({ method: "POST", path: `/api/v1/templates/send/${enc(jobId)}/cancel`, safeToRepeat: true, options })).data;
  }
}
