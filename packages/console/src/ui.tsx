import { createContext, useCallback, useContext, useEffect, useId, useState, type FormEvent, type ReactNode } from "react";
import { ApiFailure, type Session } from "./api";

/** The signed-in session, for pages deciding what a role may change. */
export const SessionContext = createContext<Session | null>(null);
export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error("no session");
  return s;
}
/** Owner and Admin manage; Member reads (the API refuses a Member's write anyway). */
export const useCanWrite = () => useSession().user.role !== "member";
export const useIsOwner = () => useSession().user.role === "owner";

/** Client-side navigation under /console (the gateway answers index.html for every client route). */
export function navigate(to: string): void {
  window.history.pushState(null, "", to);
  window.dispatchEvent(new PopStateEvent("popstate"));
}
export function usePath(): string {
  const [path, setPath] = useState(window.location.pathname);
  useEffect(() => {
    const update = () => setPath(window.location.pathname);
    window.addEventListener("popstate", update);
    return () => window.removeEventListener("popstate", update);
  }, []);
  return path;
}

/** A GET that reloads on demand; `error` keeps the API's message. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[] = []): { data: T | undefined; error: ApiFailure | undefined; reload: () => Promise<void> } {
  const [data, setData] = useState<T>();
  const [error, setError] = useState<ApiFailure>();
  const reload = useCallback(async () => {
    try {
      setData(await load());
      setError(undefined);
    } catch (err) {
      setError(asFailure(err));
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, error, reload };
}

export const asFailure = (err: unknown): ApiFailure =>
  err instanceof ApiFailure ? err : new ApiFailure(0, "CLIENT_ERROR", err instanceof Error ? err.message : String(err));

/**
 * A form's submission state: the API's failure, its field messages by path (a field shows those of its own path and
 * of paths under it, e.g. `recipients` shows `recipients.3.phone`), and the rest as the form's message.
 */
export function useSubmit<T>(action: () => Promise<T>, fields: string[] = []) {
  const [failure, setFailure] = useState<ApiFailure>();
  const [busy, setBusy] = useState(false);
  const onSubmit = async (e?: FormEvent) => {
    e?.preventDefault();
    setBusy(true);
    setFailure(undefined);
    try {
      return await action();
    } catch (err) {
      setFailure(asFailure(err));
      return undefined;
    } finally {
      setBusy(false);
    }
  };
  const fieldErrors = (name: string) =>
    (failure?.details ?? []).filter((d) => matches(d.path, name)).map((d) => d.message);
  const unplaced = failure
    ? failure.details.length === 0 || failure.details.some((d) => !fields.some((f) => matches(d.path, f)))
      ? failure
      : undefined
    : undefined;
  return { onSubmit, failure, busy, fieldErrors, formError: unplaced, clear: () => setFailure(undefined) };
}

/** `body.name`, `query.phone` and `name` all concern the field `name`/`phone`; sub-paths concern their parent. */
function matches(path: string, field: string): boolean {
  const p = path.replace(/^(body|query|params)\./, "");
  return p === field || p.startsWith(`${field}.`) || p.startsWith(`${field}[`);
}

export function Field(props: { label: string; errors?: string[]; children: (id: string, describedBy?: string) => ReactNode; hint?: string }) {
  const id = useId();
  const errId = `${id}-err`;
  const errors = props.errors ?? [];
  return (
    <div className={`field${errors.length ? " field-invalid" : ""}`}>
      <label htmlFor={id}>{props.label}</label>
      {props.children(id, errors.length ? errId : undefined)}
      {props.hint && <small className="hint">{props.hint}</small>}
      {errors.length > 0 && (
        <div className="field-error" id={errId} role="alert" data-testid="field-error">
          {errors.join("; ")}
        </div>
      )}
    </div>
  );
}

export function FormError({ failure }: { failure?: ApiFailure }) {
  if (!failure) return null;
  return (
    <div className="form-error" role="alert" data-testid="form-error">
      <strong>{failure.code}</strong>: {failure.message}
      {failure.details.length > 0 && (
        <ul>
          {failure.details.map((d, i) => (
            <li key={i}>
              {d.path}: {d.message}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function LoadError({ error }: { error?: ApiFailure }) {
  if (!error) return null;
  return (
    <div className="form-error" role="alert">
      {error.code}: {error.message}
    </div>
  );
}

/** A value the API shows once (API key, webhook secret, invitation token), with a copy button. */
export function ShownOnce(props: { label: string; value: string; testId: string; note?: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied(true);
    } catch {
      const el = document.getElementById(`${props.testId}-value`);
      if (el) window.getSelection()?.selectAllChildren(el);
    }
  };
  return (
    <div className="shown-once" role="status" data-testid={props.testId}>
      <p>
        <strong>{props.label}</strong> — {props.note ?? "shown only now: copy it and keep it somewhere safe."}
      </p>
      <code id={`${props.testId}-value`} data-testid={`${props.testId}-value`}>
        {props.value}
      </code>
      <button type="button" onClick={copy}>
        {copied ? "Copied" : "Copy"}
      </button>
    </div>
  );
}

export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : "—");

export function Section(props: { title: string; children: ReactNode; testId?: string }) {
  return (
    <section className="card" data-testid={props.testId}>
      <h2>{props.title}</h2>
      {props.children}
    </section>
  );
}

export function ReadOnlyNote() {
  return <p className="note">Your role (Member) can read this page; changes need an Owner or Admin.</p>;
}
