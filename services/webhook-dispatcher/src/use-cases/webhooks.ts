/**
 * The admin API's webhook use cases (Settings → Webhooks): subscriptions,
 * the "send test" action and the attempt log.
 */
import { z } from "zod";
import type { CreatedWebhook, CreateWebhookRequest, UpdateWebhookRequest, Webhook, WebhookDelivery, WebhookTestResult } from "@platform/contracts";
import { iso } from "@platform/db";
import { ApiError, CursorCodec } from "@platform/http";
import { newId } from "@platform/id";
import type { Logger } from "@platform/logging";
import type { DeliveryRepository } from "../db/repositories/delivery.repository";
import type { WebhookRepository, WebhookRow } from "../db/repositories/webhook.repository";
import type { HttpSender } from "./http-sender";
import { deliveryHeaders, serializeEvent } from "./payload";
import { newWebhookSecret } from "./secrets";
import { checkTargetUrl } from "./target-guard";

type Out<S extends z.ZodType> = z.infer<S>;
/**
 * Position after a row; `o` is the organization the cursor was issued to, `w` (attempt log) its webhook: a cursor
 * replayed on another organization's list, or another webhook's log, is `INVALID_CURSOR`, as the other services' are.
 */
interface Position {
  o: string;
  w?: string;
  id: string;
}
const positionOf =
  (organizationId: string, webhookId?: string) =>
  (p: unknown): p is Position =>
    typeof p === "object" && p !== null && typeof (p as Position).id === "string" && (p as Position).o === organizationId && (p as Position).w === webhookId;

export interface WebhookAdminDeps {
  webhooks: WebhookRepository;
  deliveries: DeliveryRepository;
  sender: HttpSender;
  log: Logger;
  allowPrivateTargets: boolean;
  cursorKey: string;
}

export function toWebhook(row: WebhookRow): Out<typeof Webhook> {
  return {
    id: row.id,
    url: row.url,
    events: row.events as Out<typeof Webhook>["events"],
    active: row.active,
    consecutiveFailures: row.consecutiveFailures,
    deactivatedAt: iso(row.deactivatedAt),
    createdAt: iso(row.createdAt)!,
  };
}

export class WebhookAdmin {
  private readonly webhookCursor: CursorCodec<Position>;
  private readonly deliveryCursor: CursorCodec<Position>;

  constructor(private readonly deps: WebhookAdminDeps) {
    this.webhookCursor = new CursorCodec<Position>(deps.cursorKey, "webhooks");
    this.deliveryCursor = new CursorCodec<Position>(deps.cursorKey, "webhook-deliveries");
  }

  private async checkUrl(url: string): Promise<string> {
    const check = await checkTargetUrl(url, this.deps.allowPrivateTargets);
    if (!check.ok) throw ApiError.validation([{ path: "url", message: check.message }]);
    return url;
  }

  async create(organizationId: string, req: Out<typeof CreateWebhookRequest>): Promise<Out<typeof CreatedWebhook>> {
    const url = await this.checkUrl(req.url);
    const secret = newWebhookSecret();
    const row = await this.deps.webhooks.create({ id: newId("webhook"), organizationId, url, events: [...new Set(req.events)], secret });
    this.deps.log.info({ organizationId, webhookId: row.id }, "webhook created");
    return { id: row.id, url: row.url, events: row.events as Out<typeof CreatedWebhook>["events"], active: row.active, secret, createdAt: iso(row.createdAt)! };
  }

  async list(organizationId: string, q: { limit: number; cursor?: string }) {
    const after = q.cursor !== undefined ? this.webhookCursor.decode(q.cursor, positionOf(organizationId)).id : undefined;
    const rows = await this.deps.webhooks.listPage(organizationId, q.limit + 1, after);
    const items = rows.slice(0, q.limit).map(toWebhook);
    return rows.length > q.limit ? { items, nextCursor: this.webhookCursor.encode({ o: organizationId, id: items[items.length - 1].id }) } : { items };
  }

  async get(organizationId: string, id: string): Promise<WebhookRow> {
    const row = await this.deps.webhooks.find(organizationId, id);
    if (!row) throw ApiError.notFound("Webhook");
    return row;
  }

  async update(organizationId: string, id: string, req: Out<typeof UpdateWebhookRequest>): Promise<Out<typeof Webhook>> {
    await this.get(organizationId, id);
    const url = req.url === undefined ? undefined : await this.checkUrl(req.url);
    const row = await this.deps.webhooks.update(organizationId, id, {
      url,
      events: req.events ? [...new Set(req.events)] : undefined,
      active: req.active,
    });
    if (!row) throw ApiError.notFound("Webhook");
    return toWebhook(row);
  }

  async remove(organizationId: string, id: string): Promise<void> {
    if (!(await this.deps.webhooks.delete(organizationId, id))) throw ApiError.notFound("Webhook");
  }

  /**
   * One `webhook.test` attempt, now: never retried, never counted toward
   * deactivation, recorded in the attempt log. A deactivated webhook gets
   * nothing until re-enabled (contract section 2), the test included: the
   * answer says it was not delivered, and no attempt is made or logged.
   */
  async sendTest(organizationId: string, id: string): Promise<Out<typeof WebhookTestResult>> {
    const webhook = await this.deps.webhooks.findWithSecret(organizationId, id);
    if (!webhook) throw ApiError.notFound("Webhook");
    if (!webhook.active) return { delivered: false, responseStatus: null, durationMs: 0 };
    const eventId = newId("event");
    const deliveryId = newId("delivery");
    const startedAt = new Date();
    const body = serializeEvent({ event: "webhook.test", timestamp: startedAt.toISOString(), organizationId, data: { id: eventId, webhookId: id } });
    const headers = deliveryHeaders({ body, secret: webhook.secret, event: "webhook.test", eventId, deliveryId, now: startedAt });
    const outcome = await this.deps.sender.send(webhook.url, Buffer.from(body, "utf8"), headers);
    await this.deps.deliveries.recordTest({
      deliveryId,
      webhookId: id,
      organizationId,
      eventId,
      event: "webhook.test",
      attempt: 1,
      responseStatus: outcome.status,
      responseBody: outcome.body,
      error: outcome.error,
      durationMs: outcome.durationMs,
      createdAt: startedAt,
    });
    return { delivered: outcome.ok, responseStatus: outcome.status, durationMs: outcome.durationMs };
  }

  async listDeliveries(organizationId: string, id: string, q: { limit: number; cursor?: string }) {
    await this.get(organizationId, id);
    const before = q.cursor !== undefined ? this.deliveryCursor.decode(q.cursor, positionOf(organizationId, id)).id : undefined;
    const rows = await this.deps.deliveries.listAttempts(organizationId, id, q.limit + 1, before);
    const items: Array<Out<typeof WebhookDelivery>> = rows.slice(0, q.limit).map((r) => ({
      id: r.id,
      eventId: r.eventId,
      event: r.event,
      attempt: r.attempt,
      createdAt: iso(r.createdAt)!,
      responseStatus: r.responseStatus,
      responseBody: r.responseBody,
      error: r.error,
      durationMs: r.durationMs,
    }));
    return rows.length > q.limit ? { items, nextCursor: this.deliveryCursor.encode({ o: organizationId, w: id, id: items[items.length - 1].id }) } : { items };
  }
}
