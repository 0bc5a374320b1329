import { useEffect, useState } from "react";
import { get, post, type Channel, type OptOutLookup, type Page } from "../api";
import { asFailure, Field, FormError, ReadOnlyNote, Section, useCanWrite, useLoad, useSubmit, when } from "../ui";
import type { ApiFailure } from "../api";

export function OptOutsPage() {
  const canWrite = useCanWrite();
  const { data: channels } = useLoad(() => get<Page<Channel>>("/channels?limit=100"));
  const channelName = (id: string) => channels?.items.find((c) => c.id === id)?.name ?? id;
  // Bumped on every addition, so adding the same number again shows it again.
  const [lookedUp, setLookedUp] = useState<{ phone: string; n: number }>();
  return (
    <>
      {!canWrite && <ReadOnlyNote />}
      {canWrite && <AddOptOut channels={channels?.items ?? []} onAdded={(phone) => setLookedUp((prev) => ({ phone, n: (prev?.n ?? 0) + 1 }))} />}
      <LookUp channelName={channelName} canWrite={canWrite} phone={lookedUp} />
    </>
  );
}

function AddOptOut({ channels, onAdded }: { channels: Channel[]; onAdded: (phone: string) => void }) {
  const [channelId, setChannelId] = useState("");
  const [phone, setPhone] = useState("");
  const [reason, setReason] = useState("");
  const [added, setAdded] = useState<string>();
  const form = useSubmit(async () => {
    await post("/opt-outs", { messagingChannelId: channelId, phone, ...(reason ? { reason } : {}) });
    setAdded(phone);
    onAdded(phone);
  }, ["messagingChannelId", "phone", "reason"]);
  return (
    <Section title="Add an opt-out by hand">
      <form onSubmit={form.onSubmit} aria-label="Add an opt-out" className="grid-form">
        <Field label="Channel" errors={form.fieldErrors("messagingChannelId")}>
          {(id, d) => (
            <select id={id} aria-describedby={d} value={channelId} onChange={(e) => setChannelId(e.target.value)}>
              <option value="">Choose a channel</option>
              {channels.map((c) => (
                <option key={c.id} value={c.id}>{c.name} ({c.phoneNumber})</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Phone number" errors={form.fieldErrors("phone")}>
          {(id, d) => <input id={id} aria-describedby={d} value={phone} placeholder="+15550001111" onChange={(e) => setPhone(e.target.value)} />}
        </Field>
        <Field label="Reason (optional)" errors={form.fieldErrors("reason")}>
          {(id, d) => <input id={id} aria-describedby={d} value={reason} onChange={(e) => setReason(e.target.value)} />}
        </Field>
        <FormError failure={form.formError} />
        <button type="submit" disabled={form.busy}>Add opt-out</button>
        {added && <span role="status"> Opted out: {added}</span>}
      </form>
    </Section>
  );
}

function LookUp({ channelName, canWrite, phone: given }: { channelName: (id: string) => string; canWrite: boolean; phone?: { phone: string; n: number } }) {
  const [phone, setPhone] = useState("");
  const [result, setResult] = useState<OptOutLookup>();
  const [rowError, setRowError] = useState<ApiFailure>();
  const search = (p: string) => get<OptOutLookup>(`/opt-outs?phone=${encodeURIComponent(p)}`).then(setResult);
  const form = useSubmit(() => search(phone), ["phone"]);
  useEffect(() => {
    if (!given) return;
    setPhone(given.phone);
    search(given.phone).then(() => setRowError(undefined), (err) => setRowError(asFailure(err)));
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [given]);
  return (
    <Section title="Look up a phone number" testId="opt-out-lookup">
      <form onSubmit={form.onSubmit} aria-label="Look up an opt-out" className="inline">
        <Field label="Phone number to look up" errors={form.fieldErrors("phone")}>
          {(id, d) => <input id={id} aria-describedby={d} value={phone} onChange={(e) => setPhone(e.target.value)} />}
        </Field>
        <button type="submit" disabled={form.busy}>Look up</button>
        <FormError failure={form.formError} />
      </form>
      <FormError failure={rowError} />
      {result && (
        <table data-testid="opt-out-result">
          <caption>{result.phone}: {result.items.some((i) => i.active) ? "opted out" : "not opted out"}</caption>
          <thead>
            <tr>
              <th>Channel</th>
              <th>State</th>
              <th>Source</th>
              <th>Reason</th>
              <th>Since</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {result.items.map((o) => (
              <tr key={o.optOutId} data-testid={`opt-out-${o.messagingChannelId}`}>
                <td>{channelName(o.messagingChannelId)}</td>
                <td data-testid="opt-out-state">{o.active ? "opted out" : `cleared ${when(o.revokedAt)}`}</td>
                <td>{o.source}{o.keyword ? ` (${o.keyword})` : ""}</td>
                <td>{o.reason ?? "—"}</td>
                <td>{when(o.createdAt)}</td>
                <td>
                  {canWrite && o.active && (
                    <button
                      type="button"
                      className="small"
                      onClick={() =>
                        post("/opt-outs/actions", { action: "clear", messagingChannelId: o.messagingChannelId, phone: o.phone }).then(
                          () => { setRowError(undefined); return search(result.phone); },
                          (err) => setRowError(asFailure(err)),
                        )
                      }
                    >
                      Clear
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {result && result.items.length === 0 && <p className="empty">This number never opted out.</p>}
    </Section>
  );
}
