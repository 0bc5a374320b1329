import { useState } from "react";
import { del, get, post, type ApiKey, type CreatedApiKey, type Page } from "../api";
import { Field, FormError, LoadError, ReadOnlyNote, Section, ShownOnce, useCanWrite, useLoad, useSubmit, when } from "../ui";

export function ApiKeysPage() {
  const canWrite = useCanWrite();
  const { data, error, reload } = useLoad(() => get<Page<ApiKey>>("/api-keys?limit=100"));
  const [name, setName] = useState("");
  const [created, setCreated] = useState<CreatedApiKey>();
  const form = useSubmit(async () => {
    const key = await post<CreatedApiKey>("/api-keys", { name });
    setCreated(key);
    setName("");
    await reload();
  }, ["name"]);
  const [revokeError, setRevokeError] = useState<string>();

  return (
    <>
      <LoadError error={error} />
      {!canWrite && <ReadOnlyNote />}
      <Section title="Create an API key">
        <form onSubmit={form.onSubmit} aria-label="Create an API key" className="inline">
          <fieldset disabled={!canWrite}>
            <Field label="Key name" errors={form.fieldErrors("name")}>
              {(id, d) => <input id={id} aria-describedby={d} value={name} onChange={(e) => setName(e.target.value)} />}
            </Field>
            <button type="submit" disabled={form.busy || !canWrite}>
              Create key
            </button>
          </fieldset>
          <FormError failure={form.formError} />
        </form>
        {created && <ShownOnce label={`API key “${created.name}”`} value={created.key} testId="new-api-key" />}
      </Section>
      <Section title="Keys" testId="api-keys">
        {revokeError && (
          <div className="form-error" role="alert">
            {revokeError}
          </div>
        )}
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Prefix</th>
              <th>Created</th>
              <th>Last used</th>
              <th>State</th>
            </tr>
          </thead>
          <tbody>
            {data?.items.map((k) => (
              <tr key={k.id} data-testid={`api-key-${k.id}`}>
                <td>{k.name}</td>
                <td>
                  <code>{k.keyPrefix}…</code>
                </td>
                <td>{when(k.createdAt)}</td>
                <td>{when(k.lastUsedAt)}</td>
                <td>
                  {k.revokedAt ? (
                    `revoked ${when(k.revokedAt)}`
                  ) : canWrite ? (
                    <button
                      type="button"
                      className="small danger"
                      onClick={async () => {
                        if (!window.confirm(`Revoke the key “${k.name}”? Integrations using it stop working.`)) return;
                        try {
                          await del(`/api-keys/${k.id}`);
                          setRevokeError(undefined);
                        } catch (err) {
                          setRevokeError(err instanceof Error ? err.message : String(err));
                        }
                        await reload();
                      }}
                    >
                      Revoke
                    </button>
                  ) : (
                    "active"
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        {data && data.items.length === 0 && <p className="empty">No key yet.</p>}
      </Section>
    </>
  );
}
