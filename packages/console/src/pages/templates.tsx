import { useState } from "react";
import { get, patch, post, TEMPLATE_STATUSES, type Page, type Template } from "../api";
import { asFailure, Field, FormError, LoadError, ReadOnlyNote, Section, useCanWrite, useLoad, useSubmit, when } from "../ui";
import type { ApiFailure } from "../api";

export function TemplatesPage() {
  const canWrite = useCanWrite();
  const { data, error, reload } = useLoad(() => get<Page<Template>>("/templates?limit=100"));
  const [rowError, setRowError] = useState<ApiFailure>();
  return (
    <>
      <LoadError error={error} />
      {!canWrite && <ReadOnlyNote />}
      {canWrite && <AddTemplate onDone={reload} />}
      <Section title="Templates" testId="templates">
        <FormError failure={rowError} />
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Language</th>
              <th>Category</th>
              <th>Provider id</th>
              <th>Parameters</th>
              <th>Status</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {data?.items.map((t) => (
              <tr key={t.id} data-testid={`template-${t.id}`}>
                <td>{t.name}</td>
                <td>{t.language}</td>
                <td>{t.category ?? "—"}</td>
                <td>
                  <code>{t.providerTemplateId}</code>
                </td>
                <td>{t.bodyParameterCount}</td>
                <td>
                  {canWrite ? (
                    <select
                      aria-label={`Status of ${t.name}`}
                      value={t.status}
                      onChange={(e) => patch(`/templates/${t.id}`, { status: e.target.value }).then(() => { setRowError(undefined); return reload(); }, (err) => setRowError(asFailure(err)))}
                    >
                      {TEMPLATE_STATUSES.map((s) => (
                        <option key={s}>{s}</option>
                      ))}
                    </select>
                  ) : (
                    <span className={`badge status-${t.status}`}>{t.status}</span>
                  )}
                </td>
                <td>{when(t.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {data && data.items.length === 0 && <p className="empty">No template yet.</p>}
      </Section>
    </>
  );
}

function AddTemplate({ onDone }: { onDone: () => Promise<void> }) {
  const [v, setV] = useState({ name: "", language: "en_US", category: "UTILITY", status: "pending", bodyParameterCount: "0", providerTemplateId: "", templateAccountId: "" });
  const set = (k: keyof typeof v) => (e: { target: { value: string } }) => setV({ ...v, [k]: e.target.value });
  const form = useSubmit(async () => {
    await post("/templates", { ...v, bodyParameterCount: Number(v.bodyParameterCount), category: v.category || undefined });
    setV({ ...v, name: "", providerTemplateId: "" });
    await onDone();
  }, ["name", "language", "category", "status", "bodyParameterCount", "providerTemplateId", "templateAccountId"]);
  return (
    <Section title="Register a template">
      <form onSubmit={form.onSubmit} aria-label="Register a template" className="grid-form">
        <Field label="Template name" errors={form.fieldErrors("name")}>{(id, d) => <input id={id} aria-describedby={d} value={v.name} onChange={set("name")} />}</Field>
        <Field label="Language" errors={form.fieldErrors("language")}>{(id, d) => <input id={id} aria-describedby={d} value={v.language} onChange={set("language")} />}</Field>
        <Field label="Category" errors={form.fieldErrors("category")}>{(id, d) => <input id={id} aria-describedby={d} value={v.category} onChange={set("category")} />}</Field>
        <Field label="Status" errors={form.fieldErrors("status")}>
          {(id, d) => (
            <select id={id} aria-describedby={d} value={v.status} onChange={set("status")}>
              {TEMPLATE_STATUSES.map((s) => <option key={s}>{s}</option>)}
            </select>
          )}
        </Field>
        <Field label="Body parameters" errors={form.fieldErrors("bodyParameterCount")}>{(id, d) => <input id={id} aria-describedby={d} inputMode="numeric" value={v.bodyParameterCount} onChange={set("bodyParameterCount")} />}</Field>
        <Field label="Provider template id" errors={form.fieldErrors("providerTemplateId")}>{(id, d) => <input id={id} aria-describedby={d} value={v.providerTemplateId} onChange={set("providerTemplateId")} />}</Field>
        <Field label="Template account id" errors={form.fieldErrors("templateAccountId")}>{(id, d) => <input id={id} aria-describedby={d} value={v.templateAccountId} onChange={set("templateAccountId")} />}</Field>
        <FormError failure={form.formError} />
        <button type="submit" disabled={form.busy}>Register template</button>
      </form>
    </Section>
  );
}
