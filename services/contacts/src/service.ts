import { outboxRequestIdMigration, outboxTraceMigration } from "@platform/bus";
import { Router } from "express";
import type { ServiceDefinition } from "@platform/service";
import { consumeChannelUpserted } from "./bus/consumers/sys.channel.upserted.consumer";
import { retireKeywordConsumer } from "./bus/consumers/retired";
import { consumeOrganizationUpserted } from "./bus/consumers/sys.organization.upserted.consumer";
import { serveResponders } from "./bus/responders";
import { entities } from "./db/entities";
import { CreateContactsSchema1763760000000 } from "./db/migrations/1763760000000-CreateContactsSchema";
import { OptOutsByPhone1764500000000 } from "./db/migrations/1764500000000-OptOutsByPhone";
import { envShape } from "./env";
import { adminOptOutsCreate } from "./routes/admin_opt-outs_create";
import { adminOptOutsLookup } from "./routes/admin_opt-outs_lookup";
import { v1ContactsList } from "./routes/v1_contacts_list";
import { v1OptOutsCreate } from "./routes/v1_opt-outs_create";
import { createContext, SCHEMA } from "./use-cases/context";

/**
 * contacts: the organization's contacts and the per-channel opt-outs every
 * send path obeys (RPC checkOptOuts), keyword opt-outs from inbound messages,
 * and `optout.created` through the outbox.
 */
export const definition: ServiceDefinition<typeof envShape> = {
  name: "contacts",
  schema: SCHEMA,
  env: envShape,
  entities,
  migrations: [CreateContactsSchema1763760000000, outboxRequestIdMigration("contacts"), outboxTraceMigration("contacts"), OptOutsByPhone1764500000000],
  routes(deps) {
    const ctx = createContext(deps);
    const router = Router();
    v1ContactsList(router, ctx);
    v1OptOutsCreate(router, ctx);
    adminOptOutsCreate(router, ctx);
    adminOptOutsLookup(router, ctx);
    return router;
  },
  async start(deps) {
    const ctx = createContext(deps);
    serveResponders(ctx);
    await consumeOrganizationUpserted(ctx);
    await consumeChannelUpserted(ctx);
    await retireKeywordConsumer(ctx);
    return [];
  },
};

export { envShape } from "./env";
export { contactCursorCodec, type ContactCursorPosition } from "./use-cases/list-contacts";
export { matchOptOutKeyword } from "./use-cases/keyword-opt-out";
