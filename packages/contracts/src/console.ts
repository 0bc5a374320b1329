/** Schemas of the console's API (`/console/api/*`, issue 15): users, roles, sessions and the settings a person manages. */
import { z } from "zod";
import { Timestamp } from "./common";
import { UpdateOrganizationRequest } from "./admin";

export const ConsoleRole = z.enum(["owner", "admin", "member"]);
export type ConsoleRole = z.infer<typeof ConsoleRole>;

export const PASSWORD_MIN_LENGTH = 12;
const Email = z.string().trim().toLowerCase().max(320).pipe(z.email());
const Password = z.string().min(PASSWORD_MIN_LENGTH, `at least ${PASSWORD_MIN_LENGTH} characters`).max(1024);

/** `POST /admin/v1/organizations/{orgId}/users` (operator's admin token): the first Owner of an organization. */
export const CreateUserRequest = z.object({ email: Email, password: Password, role: ConsoleRole.default("owner") });
export const ConsoleUser = z.object({
  id: z.string(),
  organizationId: z.string(),
  email: z.string(),
  role: ConsoleRole,
  createdAt: Timestamp,
});
export type ConsoleUser = z.infer<typeof ConsoleUser>;

/** `POST /console/api/session`. */
export const SignInRequest = z.object({ email: Email, password: z.string().min(1).max(1024) });
/** The signed-in user; `csrfToken` goes back in `X-CSRF-Token` on every state change. */
export const ConsoleSession = z.object({ user: ConsoleUser, csrfToken: z.string(), expiresAt: Timestamp });

/** `PATCH /console/api/users/{userId}` (Owner; not one's own role, so an organization always keeps an Owner). */
export const UpdateUserRoleRequest = z.object({ role: ConsoleRole });

/** `POST /console/api/invitations` (Owner). */
export const CreateInvitationRequest = z.object({ email: Email, role: z.enum(["admin", "member"]) });
/** The token is in this answer only; the database keeps its SHA-256. */
export const CreatedInvitation = z.object({
  id: z.string(),
  email: z.string(),
  role: ConsoleRole,
  token: z.string(),
  expiresAt: Timestamp,
});
/** `GET /console/api/invitations`: pending ones (neither accepted nor expired), never their token. */
export const PendingInvitation = z.object({ id: z.string(), email: z.string(), role: ConsoleRole, createdAt: Timestamp, expiresAt: Timestamp });
/** `POST /console/api/invitations/accept` (no session). */
export const AcceptInvitationRequest = z.object({ token: z.string().min(1).max(200), password: Password });

/** `PATCH /console/api/organization`: the plan is the operator's, read-only here. */
export const ConsoleUpdateOrganizationRequest = UpdateOrganizationRequest.pick({ name: true, rateLimit: true, optOutKeywords: true }).strict();
