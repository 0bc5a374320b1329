import { outboxRequestIdMigration } from "@platform/bus";
import { ApiKeyEntity } from "./entities/api-key.entity";
import { OrganizationEntity } from "./entities/organization.entity";
import { Init1763769600000 } from "./migrations/1763769600000-Init";

export const definitionEntities = [OrganizationEntity, ApiKeyEntity];
export const definitionMigrations = [Init1763769600000, outboxRequestIdMigration("gateway")];
export const SCHEMA = "gateway";
