import { useEffect, useRef, useState } from "react";
import { BarController, BarElement, CategoryScale, Chart, Legend, LinearScale, Tooltip } from "chart.js";
import { get, type Analytics } from "../api";
import { Field, FormError, Section, useSubmit } from "../ui";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);

/** Days drawn at most (one analytics call each). */
const MAX_DAYS = 92;
/** Calls in flight at once. */
const CONCURRENCY = 6;
const STATUS_COLORS: Record<string, string> = { sent: "#6b8fd6", delivered: "#3aa66a", read: "#1f6f43", failed: "#d64545", pending: "#b9b9b9", cancelled: "#8c8c8c" };

const isoDay = (d: Date) => d.toISOString().slice(0, 10);
const daysBetween = (start: string, end: string): string[] => {
  const out: string[] = [];
  for (let t = Date.parse(`${start}T00:00:00Z`); t <= Date.parse(`${end}T00:00:00Z`) && out.length <= MAX_DAYS; t += 86_400_000) out.push(isoDay(new Date(t)));
  return out;
};

async function mapLimited<T, R>(items: T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    }),
  );
  return out;
}

interface Result {
  whole: Analytics;
  days: Array<{ day: string; counts: Record<string, number> }>;
}

export function AnalyticsPage() {
  const today = new Date();
  const [start, setStart] = useState(isoDay(new Date(today.getTime() - 6 * 86_400_000)));
  const [end, setEnd] = useState(isoDay(today));
  const [result, setResult] = useState<Result>();
  const form = useSubmit(async () => {
    const query = (s: string, e: string) => get<Analytics>(`/analytics?startDate=${encodeURIComponent(s)}&endDate=${encodeURIComponent(e)}`);
    // The whole range first: the API validates the dates and answers the three rates.
    const whole = await query(start, end);
    const days = daysBetween(start, end);
    if (days.length > MAX_DAYS) throw new Error(`Choose at most ${MAX_DAYS} days to draw`);
    const perDay = await mapLimited(days, CONCURRENCY, (d) => query(d, d));
    setResult({ whole, days: days.map((day, i) => ({ day, counts: perDay[i].outboundMessages.counts })) });
  }, ["startDate", "endDate"]);
  useEffect(() => {
    void form.onSubmit();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  return (
    <>
      <Section title="Range">
        <form onSubmit={form.onSubmit} aria-label="Analytics range" className="inline">
          <Field label="From (UTC day)" errors={form.fieldErrors("startDate")}>
            {(id, d) => <input id={id} aria-describedby={d} type="date" value={start} onChange={(e) => setStart(e.target.value)} />}
          </Field>
          <Field label="To (UTC day, inclusive)" errors={form.fieldErrors("endDate")}>
            {(id, d) => <input id={id} aria-describedby={d} type="date" value={end} onChange={(e) => setEnd(e.target.value)} />}
          </Field>
          <button type="submit" disabled={form.busy}>Show</button>
        </form>
        <FormError failure={form.formError} />
      </Section>
      {result && (
        <>
          <Section title="Outbound messages" testId="analytics-rates">
            <dl className="facts rates">
              <dt>Messages</dt>
              <dd data-testid="analytics-total">{result.whole.outboundMessages.total}</dd>
              <dt>Delivery rate</dt>
              <dd data-testid="delivery-rate">{pct(result.whole.outboundMessages.deliveryRate)}</dd>
              <dt>Read rate</dt>
              <dd data-testid="read-rate">{pct(result.whole.outboundMessages.readRate)}</dd>
              <dt>Failure rate</dt>
              <dd data-testid="failure-rate">{pct(result.whole.outboundMessages.failureRate)}</dd>
            </dl>
          </Section>
          <Section title="Messages by status per day">
            <StatusChart days={result.days} />
          </Section>
        </>
      )}
    </>
  );
}

const pct = (r: number) => `${(r * 100).toFixed(1)}%`;

function StatusChart({ days }: { days: Result["days"] }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [drawn, setDrawn] = useState<{ points: number; total: number }>();
  useEffect(() => {
    if (!canvas.current) return;
    const statuses = [...new Set(days.flatMap((d) => Object.keys(d.counts)))];
    const chart = new Chart(canvas.current, {
      type: "bar",
      data: {
        labels: days.map((d) => d.day),
        datasets: statuses.map((s) => ({ label: s, data: days.map((d) => d.counts[s] ?? 0), backgroundColor: STATUS_COLORS[s] ?? "#999" })),
      },
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, ticks: { precision: 0 } } },
        plugins: { legend: { position: "bottom" } },
      },
    });
    setDrawn({ points: days.length, total: days.reduce((n, d) => n + Object.values(d.counts).reduce((a, b) => a + b, 0), 0) });
    return () => chart.destroy();
  }, [days]);
  return (
    <div className="chart" data-testid="analytics-chart" data-drawn={drawn ? "true" : "false"} data-days={drawn?.points} data-total={drawn?.total}>
      <canvas ref={canvas} role="img" aria-label="Outbound messages by status per day" />
    </div>
  );
}
