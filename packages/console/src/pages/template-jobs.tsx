import { useEffect, useState } from "react";
import { FINAL_JOB_STATES, get, post, type Channel, type Page, type Template, type TemplateJobList } from "../api";
import { asFailure, Field, FormError, LoadError, ReadOnlyNote, Section, useCanWrite, useLoad, useSubmit, when } from "../ui";
import type { ApiFailure } from "../api";

/** While a job is unfinished the list is polled this often (live progress). */
const POLL_MS = 1_500;

export function TemplateJobsPage() {
  const canWrite = useCanWrite();
  const { data, error, reload } = useLoad(() => get<TemplateJobList>("/template-jobs?limit=50"));
  const [rowError, setRowError] = useState<ApiFailure>();
  const live = data?.items.some((j) => !FINAL_JOB_STATES.includes(j.status)) ?? false;
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => void reload(), POLL_MS);
    return () => clearInterval(timer);
  }, [live, reload]);
  return (
    <>
      <LoadError error={error} />
      {!canWrite && <ReadOnlyNote />}
      {canWrite && <QueueJob onDone={reload} />}
      <Section title="Jobs" testId="template-jobs">
        <p className="note" data-testid="polling">{live ? "Updating live while jobs run…" : "All jobs are finished."}</p>
        <FormError failure={rowError} />
        <table>
          <thead>
            <tr>
              <th>Job</th>
              <th>Status</th>
              <th>Progress</th>
              <th>Sent</th>
              <th>Failed</th>
              <th>Skipped (opted out)</th>
              <th>Scheduled</th>
              <th>Created</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {data?.items.map((j) => {
              const done = j.sent + j.failed + j.skipped;
              return (
                <tr key={j.id} data-testid={`job-${j.id}`} data-status={j.status}>
                  <td><code>{j.id}</code></td>
                  <td data-testid="job-status">{j.status}</td>
                  <td>
                    <progress max={j.recipients} value={done} aria-label={`Progress of ${j.id}`} /> <span data-testid="job-progress">{done}/{j.recipients}</span>
                  </td>
                  <td>{j.sent}</td>
                  <td>{j.failed}</td>
                  <td>{j.skipped}</td>
                  <td>{when(j.scheduledFor)}</td>
                  <td>{when(j.createdAt)}</td>
                  <td>
                    {canWrite && !FINAL_JOB_STATES.includes(j.status) && (
                      <button type="button" className="small danger" onClick={() => post(`/template-jobs/${j.id}/cancel`).then(() => { setRowError(undefined); return reload(); }, (err) => setRowError(asFailure(err)))}>
                        Cancel
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
        {data && data.items.length === 0 && <p className="empty">No job yet.</p>}
      </Section>
    </>
  );
}

/** Recipients as lines `phone, parameter 1, parameter 2…`. */
function parseRecipients(text: string) {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .map((line) => {
      const [phone, ...params] = line.split(",").map((p) => p.trim());
      return params.length ? { phone, bodyParameters: params } : { phone };
    });
}

function QueueJob({ onDone }: { onDone: () => Promise<void> }) {
  const { data: templates } = useLoad(() => get<Page<Template>>("/templates?limit=100"));
  const { data: channels } = useLoad(() => get<Page<Channel>>("/channels?limit=100"));
  const [templateId, setTemplateId] = useState("");
  const [channelId, setChannelId] = useState("");
  const [recipients, setRecipients] = useState("");
  const [scheduledAt, setScheduledAt] = useState("");
  const [throttle, setThrottle] = useState("");
  const form = useSubmit(async () => {
    await post("/template-jobs", {
      templateId,
      messagingChannelId: channelId,
      recipients: parseRecipients(recipients),
      ...(scheduledAt ? { scheduledAt: new Date(scheduledAt).toISOString() } : {}),
      ...(throttle ? { throttlePerHour: Number(throttle) } : {}),
    });
    setRecipients("");
    await onDone();
  }, ["templateId", "messagingChannelId", "recipients", "scheduledAt", "throttlePerHour"]);
  return (
    <Section title="Send a template in bulk">
      <form onSubmit={form.onSubmit} aria-label="Send a template in bulk">
        <Field label="Template" errors={form.fieldErrors("templateId")}>
          {(id, d) => (
            <select id={id} aria-describedby={d} value={templateId} onChange={(e) => setTemplateId(e.target.value)}>
              <option value="">Choose a template</option>
              {templates?.items.map((t) => (
                <option key={t.id} value={t.id}>{t.name} ({t.language}, {t.status})</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Channel" errors={form.fieldErrors("messagingChannelId")}>
          {(id, d) => (
            <select id={id} aria-describedby={d} value={channelId} onChange={(e) => setChannelId(e.target.value)}>
              <option value="">Choose a channel</option>
              {channels?.items.map((c) => (
                <option key={c.id} value={c.id}>{c.name} ({c.phoneNumber})</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Recipients" errors={form.fieldErrors("recipients")} hint="One per line: phone, then the body parameters separated by commas.">
          {(id, d) => <textarea id={id} aria-describedby={d} rows={5} value={recipients} onChange={(e) => setRecipients(e.target.value)} placeholder={"+15550001111, Ann\n+15550002222, Bob"} />}
        </Field>
        <Field label="Schedule for (optional)" errors={form.fieldErrors("scheduledAt")}>
          {(id, d) => <input id={id} aria-describedby={d} type="datetime-local" value={scheduledAt} onChange={(e) => setScheduledAt(e.target.value)} />}
        </Field>
        <Field label="Throttle per hour (optional)" errors={form.fieldErrors("throttlePerHour")}>
          {(id, d) => <input id={id} aria-describedby={d} inputMode="numeric" value={throttle} onChange={(e) => setThrottle(e.target.value)} />}
        </Field>
        <FormError failure={form.formError} />
        <button type="submit" disabled={form.busy}>Queue job</button>
      </form>
    </Section>
  );
}
