import { Router } from "express";
import type { WebhookAdmin } from "../use-cases/webhooks";
import { registerCreateWebhook } from "./admin_webhooks_create";
import { registerDeleteWebhook } from "./admin_webhooks_delete";
import { registerListDeliveries } from "./admin_webhooks_deliveries";
import { registerListWebhooks } from "./admin_webhooks_list";
import { registerTestWebhook } from "./admin_webhooks_test";
import { registerUpdateWebhook } from "./admin_webhooks_update";

export function webhookRoutes(admin: WebhookAdmin): Router {
  const router = Router();
  registerCreateWebhook(router, admin);
  registerListWebhooks(router, admin);
  registerUpdateWebhook(router, admin);
  registerDeleteWebhook(router, admin);
  registerTestWebhook(router, admin);
  registerListDeliveries(router, admin);
  return router;
}
