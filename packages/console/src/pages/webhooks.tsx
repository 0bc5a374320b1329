import { useState } from "react";
import { del, get, patch, post, SUBSCRIBABLE_EVENTS, type CreatedWebhook, type Delivery, type Page, type Webhook, type WebhookTestResult } from "../api";
import { asFailure, Field, FormError, LoadError, ReadOnlyNote, Section, ShownOnce, useCanWrite, useLoad, useSubmit, when } from "../ui";
import type { ApiFailure } from "../api";

/** Characters of a response body shown in the attempt log (the API keeps 1024). */
const BODY_SHOWN = 1024;

export function WebhooksPage() {
  const canWrite = useCanWrite();
  const { data, error, reload } = useLoad(() => get<Page<Webhook>>("/webhooks?limit=100"));
  return (
    <>
      <LoadError error={error} />
      {!canWrite && <ReadOnlyNote />}
      {canWrite && <CreateWebhook onDone={reload} />}
      <Section title="Webhooks" testId="webhooks">
        {data?.items.map((w) => <WebhookCard key={w.id} webhook={w} canWrite={canWrite} onChange={reload} />)}
        {data && data.items.length === 0 && <p className="empty">No webhook yet.</p>}
      </Section>
    </>
  );
}

function CreateWebhook({ onDone }: { onDone: () => Promise<void> }) {
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<string[]>([]);
  const [created, setCreated] = useState<CreatedWebhook>();
  const form = useSubmit(async () => {
    const w = await post<CreatedWebhook>("/webhooks", { url, events });
    setCreated(w);
    setUrl("");
    setEvents([]);
    await onDone();
  }, ["url", "events"]);
  return (
    <Section title="Create a webhook">
      <form onSubmit={form.onSubmit} aria-label="Create a webhook">
        <Field label="Endpoint URL" errors={form.fieldErrors("url")} hint="HTTPS, publicly reachable.">
          {(id, d) => <input id={id} aria-describedby={d} value={url} placeholder="https://example.com/webhooks" onChange={(e) => setUrl(e.target.value)} />}
        </Field>
        <fieldset className={form.fieldErrors("events").length ? "field-invalid" : undefined}>
          <legend>Events</legend>
          <div className="checks">
            {SUBSCRIBABLE_EVENTS.map((ev) => (
              <label key={ev} className="check">
                <input
                  type="checkbox"
                  checked={events.includes(ev)}
                  onChange={(e) => setEvents(e.target.checked ? [...events, ev] : events.filter((x) => x !== ev))}
                />{" "}
                {ev}
              </label>
            ))}
          </div>
          {form.fieldErrors("events").length > 0 && (
            <div className="field-error" role="alert" data-testid="field-error">
              {form.fieldErrors("events").join("; ")}
            </div>
          )}
        </fieldset>
        <FormError failure={form.formError} />
        <button type="submit" disabled={form.busy}>
          Create webhook
        </button>
      </form>
      {created && <ShownOnce label={`Signing secret of ${created.url}`} value={created.secret} testId="new-webhook-secret" />}
    </Section>
  );
}

function WebhookCard({ webhook, canWrite, onChange }: { webhook: Webhook; canWrite: boolean; onChange: () => Promise<void> }) {
  const [showLog, setShowLog] = useState(false);
  const [test, setTest] = useState<WebhookTestResult>();
  const [failure, setFailure] = useState<ApiFailure>();
  const [logVersion, setLogVersion] = useState(0);
  const act = async (fn: () => Promise<unknown>) => {
    try {
      setFailure(undefined);
      await fn();
    } catch (err) {
      setFailure(asFailure(err));
    }
  };
  return (
    <article className="webhook" data-testid={`webhook-${webhook.id}`} aria-label={`Webhook ${webhook.url}`}>
      <header>
        <code>{webhook.url}</code>{" "}
        <span className={`badge ${webhook.active ? "ok" : "bad"}`} data-testid="webhook-state">
          {webhook.active ? "active" : "deactivated"}
        </span>
      </header>
      <p>
        Events: {webhook.events.join(", ")} · consecutive failures: <span data-testid="webhook-failures">{webhook.consecutiveFailures}</span>
        {webhook.deactivatedAt && <> · deactivated {when(webhook.deactivatedAt)}</>}
      </p>
      <div className="actions">
        {canWrite && (
          <button
            type="button"
            onClick={() =>
              act(async () => {
                setTest(await post<WebhookTestResult>(`/webhooks/${webhook.id}/test`));
                setLogVersion((v) => v + 1);
              })
            }
          >
            Send test
          </button>
        )}
        {canWrite && !webhook.active && (
          <button type="button" onClick={() => act(async () => { await patch(`/webhooks/${webhook.id}`, { active: true }); await onChange(); })}>
            Re-enable
          </button>
        )}
        <button type="button" onClick={() => setShowLog(!showLog)} aria-expanded={showLog}>
          {showLog ? "Hide attempts" : "Show attempts"}
        </button>
        {canWrite && (
          <button
            type="button"
            className="danger"
            onClick={() => {
              if (window.confirm(`Delete the webhook to ${webhook.url}?`)) void act(async () => { await del(`/webhooks/${webhook.id}`); await onChange(); });
            }}
          >
            Delete
          </button>
        )}
      </div>
      {test && (
        <p role="status" data-testid="webhook-test-result">
          Test {test.delivered ? "delivered" : "not delivered"}: response status {test.responseStatus ?? "none"} in {test.durationMs} ms
        </p>
      )}
      <FormError failure={failure} />
      {showLog && <AttemptLog webhookId={webhook.id} version={logVersion} />}
    </article>
  );
}

function AttemptLog({ webhookId, version }: { webhookId: string; version: number }) {
  const { data, error, reload } = useLoad(() => get<Page<Delivery>>(`/webhooks/${webhookId}/deliveries?limit=50`), [webhookId, version]);
  return (
    <div className="attempts">
      <LoadError error={error} />
      <button type="button" className="small" onClick={() => void reload()}>
        Refresh attempts
      </button>
      <table data-testid="attempt-log">
        <thead>
          <tr>
            <th>Time</th>
            <th>Event</th>
            <th>Attempt</th>
            <th>Status</th>
            <th>Response body</th>
          </tr>
        </thead>
        <tbody>
          {data?.items.map((d) => (
            <tr key={d.id} data-testid="attempt">
              <td>{when(d.createdAt)}</td>
              <td>{d.event}</td>
              <td>{d.attempt}</td>
              <td data-testid="attempt-status">{d.responseStatus ?? d.error ?? "—"}</td>
              <td>
                <pre className="body">{(d.responseBody ?? "").slice(0, BODY_SHOWN)}</pre>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {data && data.items.length === 0 && <p className="empty">No attempt yet.</p>}
    </div>
  );
}
