import { useState } from "react";
import { del, get, patch, post, type CreatedInvitation, type PendingInvitation, type User } from "../api";
import { asFailure, Field, FormError, LoadError, Section, ShownOnce, useIsOwner, useLoad, useSession, useSubmit, when } from "../ui";
import type { ApiFailure } from "../api";

export function UsersPage() {
  const isOwner = useIsOwner();
  const me = useSession().user;
  const users = useLoad(() => get<{ items: User[] }>("/users"));
  const invitations = useLoad(() => get<{ items: PendingInvitation[] }>("/invitations"));
  const [rowError, setRowError] = useState<ApiFailure>();
  const run = (p: Promise<unknown>) => p.then(() => { setRowError(undefined); return Promise.all([users.reload(), invitations.reload()]); }, (err) => setRowError(asFailure(err)));
  return (
    <>
      <LoadError error={users.error} />
      {!isOwner && <p className="note">Only an Owner invites people and changes roles.</p>}
      {isOwner && <Invite onDone={invitations.reload} />}
      <Section title="Users" testId="users">
        <FormError failure={rowError} />
        <table>
          <thead>
            <tr><th>Email</th><th>Role</th><th>Since</th><th /></tr>
          </thead>
          <tbody>
            {users.data?.items.map((u) => (
              <tr key={u.id} data-testid={`user-${u.id}`}>
                <td>{u.email}</td>
                <td>
                  {isOwner && u.id !== me.id ? (
                    <select aria-label={`Role of ${u.email}`} value={u.role} onChange={(e) => run(patch(`/users/${u.id}`, { role: e.target.value }))}>
                      <option value="owner">owner</option>
                      <option value="admin">admin</option>
                      <option value="member">member</option>
                    </select>
                  ) : (
                    u.role
                  )}
                </td>
                <td>{when(u.createdAt)}</td>
                <td>
                  {isOwner && u.id !== me.id && (
                    <button type="button" className="small danger" onClick={() => window.confirm(`Remove ${u.email}?`) && run(del(`/users/${u.id}`))}>Remove</button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <Section title="Pending invitations" testId="invitations">
        <table>
          <thead>
            <tr><th>Email</th><th>Role</th><th>Sent</th><th>Expires</th><th /></tr>
          </thead>
          <tbody>
            {invitations.data?.items.map((i) => (
              <tr key={i.id}>
                <td>{i.email}</td>
                <td>{i.role}</td>
                <td>{when(i.createdAt)}</td>
                <td>{when(i.expiresAt)}</td>
                <td>{isOwner && <button type="button" className="small danger" onClick={() => run(del(`/invitations/${i.id}`))}>Revoke</button>}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {invitations.data && invitations.data.items.length === 0 && <p className="empty">No pending invitation.</p>}
      </Section>
    </>
  );
}

function Invite({ onDone }: { onDone: () => Promise<void> }) {
  const [email, setEmail] = useState("");
  const [role, setRole] = useState("member");
  const [link, setLink] = useState<{ email: string; url: string }>();
  const form = useSubmit(async () => {
    const inv = await post<CreatedInvitation>("/invitations", { email, role });
    setLink({ email: inv.email, url: `${window.location.origin}/console/accept#token=${inv.token}` });
    setEmail("");
    await onDone();
  }, ["email", "role"]);
  return (
    <Section title="Invite someone">
      <form onSubmit={form.onSubmit} aria-label="Invite someone" className="inline">
        <Field label="Email to invite" errors={form.fieldErrors("email")}>
          {(id, d) => <input id={id} aria-describedby={d} value={email} onChange={(e) => setEmail(e.target.value)} />}
        </Field>
        <Field label="Role" errors={form.fieldErrors("role")}>
          {(id, d) => (
            <select id={id} aria-describedby={d} value={role} onChange={(e) => setRole(e.target.value)}>
              <option value="admin">admin</option>
              <option value="member">member</option>
            </select>
          )}
        </Field>
        <button type="submit" disabled={form.busy}>Invite</button>
        <FormError failure={form.formError} />
      </form>
      {link && <ShownOnce label={`Invitation link for ${link.email}`} value={link.url} testId="invitation-link" note="shown only now: send it to them; it works once, for 7 days." />}
    </Section>
  );
}
