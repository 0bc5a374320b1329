import { randomBytes } from "node:crypto";
import type { DataSource } from "typeorm";
import { MoreThan } from "typeorm";
import type { z } from "zod";
import type { SignInRequest } from "@platform/contracts";
import { iso } from "@platform/db";
import { ApiError } from "@platform/http";
import { decoyHash, verifyPassword } from "../auth/passwords";
import { SessionEntity } from "../db/entities/session.entity";
import { UserEntity } from "../db/entities/user.entity";
import { sha256, type ConsoleUsers } from "./console-users";

export interface SessionLimits {
  ttlSeconds: number;
  /** Sign-in attempts per email, and per client address, in one window. */
  perEmail: number;
  perIp: number;
  windowSeconds: number;
  scryptCost: number;
}

export interface ActiveSession {
  session: SessionEntity;
  user: UserEntity;
}

/** Console sign-in: opaque random session ids stored hashed with an expiry, and a throttle kept in Postgres (shared by replicas). */
export class ConsoleSessions {
  constructor(
    private readonly db: DataSource,
    private readonly users: ConsoleUsers,
    private readonly limits: SessionLimits,
  ) {}

  /** Throttled first (per email and per address), then a constant-cost password check; one answer for every failure. */
  async signIn(input: z.infer<typeof SignInRequest>, ip: string) {
    // Both counted on every attempt (one limited email does not stop the address's count), then checked.
    const retries = [await this.count(`email:${input.email}`, this.limits.perEmail), await this.count(`ip:${ip}`, this.limits.perIp)].filter((r) => r > 0);
    if (retries.length > 0) {
      throw new ApiError("RATE_LIMITED", "Too many sign-in attempts; retry later", undefined, { "Retry-After": String(Math.max(...retries)) });
    }
    const user = await this.db
      .getRepository(UserEntity)
      .createQueryBuilder("u")
      .addSelect("u.passwordHash")
      .where("u.email = :email", { email: input.email })
      .getOne();
    const ok = await verifyPassword(input.password, user?.passwordHash ?? (await decoyHash(this.limits.scryptCost)));
    if (!user || !ok) throw new ApiError("UNAUTHORIZED", "Invalid email or password");
    await this.db.query(`DELETE FROM gateway.sign_in_attempts WHERE bucket = $1`, [`email:${input.email}`]);

    const id = randomBytes(32).toString("base64url");
    const session = Object.assign(new SessionEntity(), {
      idHash: sha256(id),
      userId: user.id,
      organizationId: user.organizationId,
      csrfToken: randomBytes(32).toString("base64url"),
      createdAt: new Date(),
      expiresAt: new Date(Date.now() + this.limits.ttlSeconds * 1000),
    });
    await this.db.getRepository(SessionEntity).insert(session);
    // Expired sessions of this user go now; nothing else reads them (the lookup checks the expiry).
    await this.db.query(`DELETE FROM gateway.sessions WHERE user_id = $1 AND expires_at <= now()`, [user.id]);
    return { id, answer: this.answer({ session, user }) };
  }

  answer({ session, user }: ActiveSession) {
    return { user: this.users.toDto(user), csrfToken: session.csrfToken, expiresAt: iso(session.expiresAt)! };
  }

  /** The live session of a cookie value, with its user as the database has it now (a role change applies at once). */
  async resolve(id: string): Promise<ActiveSession | null> {
    const session = await this.db.getRepository(SessionEntity).findOneBy({ idHash: sha256(id), expiresAt: MoreThan(new Date()) });
    if (!session) return null;
    const user = await this.db.getRepository(UserEntity).findOneBy({ id: session.userId, organizationId: session.organizationId });
    return user ? { session, user } : null;
  }

  async signOut(idHash: string): Promise<void> {
    await this.db.getRepository(SessionEntity).delete({ idHash });
  }

  /** Expired sessions and finished throttle windows (one row per email or address tried): deleted every few minutes. */
  async sweep(): Promise<{ sessions: number; attempts: number }> {
    const [, sessions] = await this.db.query(`DELETE FROM gateway.sessions WHERE expires_at <= now()`);
    const [, attempts] = await this.db.query(`DELETE FROM gateway.sign_in_attempts WHERE window_start <= now() - make_interval(secs => $1)`, [this.limits.windowSeconds]);
    return { sessions: Number(sessions ?? 0), attempts: Number(attempts ?? 0) };
  }

  private sweeper?: NodeJS.Timeout;
  startSweeper(everyMs = 5 * 60_000, onError: (err: Error) => void = () => undefined): void {
    this.sweeper = setInterval(() => void this.sweep().catch(onError), everyMs);
    this.sweeper.unref();
  }
  stopSweeper(): void {
    clearInterval(this.sweeper);
  }

  /** A fixed window per bucket, counted in one statement: the seconds until the window ends when over `max`, else 0. */
  private async count(bucket: string, max: number): Promise<number> {
    const window = this.limits.windowSeconds;
    const rows: Array<{ attempts: number; retry: string }> = await this.db.query(
      `INSERT INTO gateway.sign_in_attempts AS a (bucket, window_start, attempts) VALUES ($1, now(), 1)
       ON CONFLICT (bucket) DO UPDATE SET
         attempts = CASE WHEN a.window_start <= now() - make_interval(secs => $2) THEN 1 ELSE a.attempts + 1 END,
         window_start = CASE WHEN a.window_start <= now() - make_interval(secs => $2) THEN now() ELSE a.window_start END
       RETURNING attempts, EXTRACT(EPOCH FROM (window_start + make_interval(secs => $2) - now())) AS retry`,
      [bucket, window],
    );
    const { attempts, retry } = rows[0];
    return attempts > max ? Math.max(1, Math.ceil(Number(retry))) : 0;
  }
}
