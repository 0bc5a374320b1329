import { outboxRequestIdMigration, outboxTraceMigration } from "@platform/bus";
import { ApiKeyEntity } from "./entities/api-key.entity";
import { InvitationEntity } from "./entities/invitation.entity";
import { OrganizationEntity } from "./entities/organization.entity";
import { SessionEntity } from "./entities/session.entity";
import { UserEntity } from "./entities/user.entity";
import { Init1763769600000 } from "./migrations/1763769600000-Init";
import { ConsoleUsers1764000000000 } from "./migrations/1764000000000-ConsoleUsers";
import { IdempotencyScopes1764600000000 } from "./migrations/1764600000000-IdempotencyScopes";
import { IdempotencyScopeEntity } from "./entities/idempotency-scope.entity";

export const definitionEntities = [OrganizationEntity, ApiKeyEntity, UserEntity, InvitationEntity, SessionEntity, IdempotencyScopeEntity];
export const definitionMigrations = [Init1763769600000, ConsoleUsers1764000000000, outboxRequestIdMigration("gateway"), outboxTraceMigration("gateway"), IdempotencyScopes1764600000000];
export const SCHEMA = "gateway";
