import { useState } from "react";
import { get, type Conversation, type Page } from "../api";
import { LoadError, Section, useLoad, when } from "../ui";

export function ConversationsPage() {
  const [cursor, setCursor] = useState<string>();
  const [history, setHistory] = useState<string[]>([]);
  const { data, error } = useLoad(() => get<Page<Conversation>>(`/conversations?limit=25${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`), [cursor]);
  return (
    <>
      <LoadError error={error} />
      <Section title="Conversations" testId="conversations">
        <table>
          <thead>
            <tr>
              <th>Contact</th>
              <th>Channel</th>
              <th>Status</th>
              <th>Opened</th>
              <th>Last message</th>
              <th>Closed</th>
            </tr>
          </thead>
          <tbody>
            {data?.items.map((c) => (
              <tr key={c.id} data-testid={`conversation-${c.id}`}>
                <td>{c.phone}</td>
                <td><code>{c.messagingChannelId}</code></td>
                <td>{c.status}</td>
                <td>{when(c.openedAt)}</td>
                <td>{when(c.lastMessageAt)}</td>
                <td>{when(c.closedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        {data && data.items.length === 0 && <p className="empty">No conversation yet.</p>}
        <div className="actions">
          <button type="button" disabled={history.length === 0} onClick={() => { setCursor(history[history.length - 1] || undefined); setHistory(history.slice(0, -1)); }}>
            Newer
          </button>
          <button type="button" disabled={!data?.nextCursor} onClick={() => { setHistory([...history, cursor ?? ""]); setCursor(data?.nextCursor); }}>
            Older
          </button>
        </div>
      </Section>
    </>
  );
}
