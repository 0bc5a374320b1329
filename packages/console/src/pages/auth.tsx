import { useState } from "react";
import { post, type Session, type User } from "../api";
import { Field, FormError, navigate, useSubmit } from "../ui";

export function SignInPage({ onSignedIn }: { onSignedIn: (s: Session) => void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const form = useSubmit(async () => onSignedIn(await post<Session>("/session", { email, password })), ["email", "password"]);
  return (
    <div className="centered">
      <form className="card narrow" onSubmit={form.onSubmit} aria-label="Sign in">
        <h1>Sign in</h1>
        <Field label="Email" errors={form.fieldErrors("email")}>
          {(id, d) => <input id={id} aria-describedby={d} type="email" autoComplete="username" value={email} onChange={(e) => setEmail(e.target.value)} required />}
        </Field>
        <Field label="Password" errors={form.fieldErrors("password")}>
          {(id, d) => <input id={id} aria-describedby={d} type="password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.target.value)} required />}
        </Field>
        <FormError failure={form.formError} />
        <button type="submit" disabled={form.busy}>
          Sign in
        </button>
      </form>
    </div>
  );
}

/** `/console/accept#token=…`: the invitation link an Owner hands over (the token stays out of server logs). */
export function AcceptInvitationPage() {
  const fromLink = new URLSearchParams(window.location.hash.slice(1)).get("token") ?? "";
  const [token, setToken] = useState(fromLink);
  const [password, setPassword] = useState("");
  const [done, setDone] = useState<string>();
  const form = useSubmit(async () => {
    const user = await post<User>("/invitations/accept", { token, password });
    setDone(user.email);
  }, ["token", "password"]);
  if (done) {
    return (
      <div className="centered">
        <div className="card narrow" role="status">
          <h1>Invitation accepted</h1>
          <p>You can now sign in as {done}.</p>
          <button type="button" onClick={() => navigate("/console/")}>
            Go to sign in
          </button>
        </div>
      </div>
    );
  }
  return (
    <div className="centered">
      <form className="card narrow" onSubmit={form.onSubmit} aria-label="Accept invitation">
        <h1>Accept an invitation</h1>
        <Field label="Invitation token" errors={form.fieldErrors("token")}>
          {(id, d) => <input id={id} aria-describedby={d} value={token} onChange={(e) => setToken(e.target.value)} required />}
        </Field>
        <Field label="Choose a password" errors={form.fieldErrors("password")} hint="At least 12 characters.">
          {(id, d) => <input id={id} aria-describedby={d} type="password" autoComplete="new-password" value={password} onChange={(e) => setPassword(e.target.value)} required />}
        </Field>
        <FormError failure={form.formError} />
        <button type="submit" disabled={form.busy}>
          Accept invitation
        </button>
      </form>
    </div>
  );
}
