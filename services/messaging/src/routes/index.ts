import express, { type Router } from "express";
import type { JsonRoute } from "@platform/http";
import type { MessagingContext } from "../context";
import { adminChannelsCreate } from "./admin_channels_create";
import { adminChannelsList } from "./admin_channels_list";
import { adminChannelsUpdate } from "./admin_channels_update";
import { v1ConversationsList } from "./v1_conversations_list";
import { v1MessagesGet } from "./v1_messages_get";
import { v1MessagesSend } from "./v1_messages_send";

/** Routes on the fast path as well as on express (ADR 0005). */
export function buildJsonRoutes(ctx: MessagingContext): JsonRoute[] {
  return [v1MessagesSend(ctx)];
}

export function buildRoutes(ctx: MessagingContext): Router {
  const router = express.Router();
  v1MessagesGet(router, ctx);
  v1ConversationsList(router, ctx);
  adminChannelsCreate(router, ctx);
  adminChannelsList(router, ctx);
  adminChannelsUpdate(router, ctx);
  return router;
}
