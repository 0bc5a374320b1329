import type { Bus } from "@platform/bus";
import type { Logger } from "@platform/logging";
import type { ServiceDeps, ServiceEnv } from "@platform/service";
import type { DataSource } from "typeorm";
import type { envShape } from "../env";
import { ChannelsRepository } from "../db/repositories/channels.repository";
import { ContactsRepository } from "../db/repositories/contacts.repository";
import { KeywordMessagesRepository } from "../db/repositories/keyword-messages.repository";
import { OptOutsRepository } from "../db/repositories/opt-outs.repository";
import { OrganizationsRepository } from "../db/repositories/organizations.repository";
import { KeywordCache } from "./keyword-opt-out";

export type ContactsEnv = ServiceEnv<typeof envShape>;

/** What every use case of the service receives; HTTP routes and bus handlers build it once. */
export interface ContactsContext {
  env: ContactsEnv;
  db: DataSource;
  bus: Bus;
  log: Logger;
  contacts: ContactsRepository;
  optOuts: OptOutsRepository;
  channels: ChannelsRepository;
  organizations: OrganizationsRepository;
  keywordMessages: KeywordMessagesRepository;
  /** Organizations' keyword lists for the keyword consumer (evicted by this process's organization sync). */
  keywords: KeywordCache;
}

export function createContext(deps: ServiceDeps<ContactsEnv>): ContactsContext {
  return {
    env: deps.env,
    db: deps.db,
    bus: deps.bus,
    log: deps.log,
    contacts: new ContactsRepository(deps.db),
    optOuts: new OptOutsRepository(deps.db),
    channels: new ChannelsRepository(deps.db),
    organizations: new OrganizationsRepository(deps.db),
    keywordMessages: new KeywordMessagesRepository(),
    keywords: new KeywordCache(deps.env.KEYWORD_CACHE_TTL_MS),
  };
}

/** Schema that holds the outbox of this service. */
export const SCHEMA = "contacts";
