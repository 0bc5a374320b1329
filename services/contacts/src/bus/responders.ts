import { CONTACTS_RPC, RPC } from "@platform/contracts";
import type { ContactsContext } from "../use-cases/context";
import { checkOptOuts } from "../use-cases/opt-outs";
import { resolveContact, resolveContacts } from "../use-cases/resolve-contact";

/** Request/reply answered by contacts, from committed Postgres state. */
export function serveResponders(ctx: ContactsContext): void {
  ctx.bus.serve(RPC.resolveContact, (req) => resolveContact(ctx, req), "contacts");
  ctx.bus.serve(RPC.checkOptOuts, (req) => checkOptOuts(ctx, req), "contacts");
  ctx.bus.serve(CONTACTS_RPC.resolveContacts, (req) => resolveContacts(ctx, req), "contacts");
}
