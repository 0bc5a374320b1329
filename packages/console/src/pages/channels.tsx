import { useState } from "react";
import { get, patch, post, type ApiFailure, type Channel, type Page } from "../api";
import { asFailure, Field, FormError, LoadError, ReadOnlyNote, Section, useCanWrite, useLoad, useSubmit, when } from "../ui";

export function ChannelsPage() {
  const canWrite = useCanWrite();
  const { data, error, reload } = useLoad(() => get<Page<Channel>>("/channels?limit=100"));
  return (
    <>
      <LoadError error={error} />
      {!canWrite && <ReadOnlyNote />}
      {canWrite && <ConnectChannel onDone={reload} />}
      <Section title="Channels" testId="channels">
        <table>
          <thead>
            <tr>
              <th>Name</th>
              <th>Phone number</th>
              <th>Provider number id</th>
              <th>Connected</th>
              <th>Default</th>
              <th>Throughput (messages/s)</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {data?.items.map((c) => <ChannelRow key={c.id} channel={c} canWrite={canWrite} onChange={reload} />)}
          </tbody>
        </table>
        {data && data.items.length === 0 && <p className="empty">No channel yet.</p>}
      </Section>
    </>
  );
}

function ConnectChannel({ onDone }: { onDone: () => Promise<void> }) {
  const [name, setName] = useState("");
  const [phoneNumber, setPhoneNumber] = useState("");
  const [providerPhoneNumberId, setProviderId] = useState("");
  const [messagesPerSecond, setMps] = useState("80");
  const [isDefault, setIsDefault] = useState(false);
  const form = useSubmit(async () => {
    await post("/channels", { name, phoneNumber, providerPhoneNumberId, messagesPerSecond: Number(messagesPerSecond), isDefault });
    setName("");
    setPhoneNumber("");
    setProviderId("");
    await onDone();
  }, ["name", "phoneNumber", "providerPhoneNumberId", "messagesPerSecond", "isDefault"]);
  return (
    <Section title="Connect a channel">
      <form onSubmit={form.onSubmit} aria-label="Connect a channel" className="grid-form">
        <Field label="Channel name" errors={form.fieldErrors("name")}>
          {(id, d) => <input id={id} aria-describedby={d} value={name} onChange={(e) => setName(e.target.value)} />}
        </Field>
        <Field label="Phone number" errors={form.fieldErrors("phoneNumber")}>
          {(id, d) => <input id={id} aria-describedby={d} placeholder="+15550001111" value={phoneNumber} onChange={(e) => setPhoneNumber(e.target.value)} />}
        </Field>
        <Field label="Provider phone number id" errors={form.fieldErrors("providerPhoneNumberId")}>
          {(id, d) => <input id={id} aria-describedby={d} value={providerPhoneNumberId} onChange={(e) => setProviderId(e.target.value)} />}
        </Field>
        <Field label="Throughput (messages per second)" errors={form.fieldErrors("messagesPerSecond")}>
          {(id, d) => <input id={id} aria-describedby={d} inputMode="numeric" value={messagesPerSecond} onChange={(e) => setMps(e.target.value)} />}
        </Field>
        <label className="check">
          <input type="checkbox" checked={isDefault} onChange={(e) => setIsDefault(e.target.checked)} /> Default channel
        </label>
        <FormError failure={form.formError} />
        <button type="submit" disabled={form.busy}>
          Connect channel
        </button>
      </form>
    </Section>
  );
}

function ChannelRow({ channel, canWrite, onChange }: { channel: Channel; canWrite: boolean; onChange: () => Promise<void> }) {
  const [mps, setMps] = useState(String(channel.messagesPerSecond));
  const update = (body: Record<string, unknown>) => patch(`/channels/${channel.id}`, body).then(onChange);
  const throughput = useSubmit(() => update({ messagesPerSecond: Number(mps) }), ["messagesPerSecond"]);
  const [rowError, setRowError] = useState<ApiFailure>();
  const toggle = (body: Record<string, unknown>) => update(body).then(() => setRowError(undefined), (err) => setRowError(asFailure(err)));
  return (
    <tr data-testid={`channel-${channel.id}`}>
      <td>{channel.name}</td>
      <td>{channel.phoneNumber}</td>
      <td>
        <code>{channel.providerPhoneNumberId}</code>
      </td>
      <td>
        {channel.connected ? "yes" : "no"}
        {canWrite && (
          <button type="button" className="small" onClick={() => toggle({ connected: !channel.connected })}>
            {channel.connected ? "Disconnect" : "Connect"}
          </button>
        )}
      </td>
      <td>
        {channel.isDefault ? (
          "default"
        ) : canWrite ? (
          <button type="button" className="small" onClick={() => toggle({ isDefault: true })}>
            Make default
          </button>
        ) : (
          "—"
        )}
      </td>
      <td>
        <form onSubmit={throughput.onSubmit} className="inline" aria-label={`Throughput of ${channel.name}`}>
          <input aria-label={`Messages per second of ${channel.name}`} value={mps} onChange={(e) => setMps(e.target.value)} disabled={!canWrite} size={5} />
          {canWrite && (
            <button type="submit" className="small" disabled={throughput.busy}>
              Save
            </button>
          )}
          {throughput.failure && (
            <div className="field-error" role="alert">
              {[...throughput.fieldErrors("messagesPerSecond"), ...(throughput.formError ? [throughput.formError.message] : [])].join("; ")}
            </div>
          )}
        </form>
        <FormError failure={rowError} />
      </td>
      <td>{when(channel.createdAt)}</td>
    </tr>
  );
}
