import { expect } from "chai";
import { api, harness, newOrg, resolveContact } from "./harness";

/** A small seeded PRNG (mulberry32), so a failing walk can be replayed from its seed. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Seeds an organization with `n` contacts in one statement per 1000, spread over a few created_at values (ties included). */
async function seed(org: string, n: number, tag: string): Promise<Set<string>> {
  const db = harness().svc.deps.db;
  const ids = new Set<string>();
  for (let start = 0; start < n; start += 1000) {
    const count = Math.min(1000, n - start);
    const rows: Array<{ id: string }> = await db.query(
      `INSERT INTO contacts.contacts (id, organization_id, phone, created_at, updated_at)
       SELECT 'ct_' || $3 || lpad(g::text, 8, '0'), $1, '+1212' || lpad(g::text, 7, '0'),
              date_trunc('milliseconds', now()) - ((g % 50) * interval '1 millisecond'),
              date_trunc('milliseconds', now())
       FROM generate_series($2::int, $2::int + $4::int - 1) g
       RETURNING id`,
      [org, start, tag, count],
    );
    for (const r of rows) ids.add(r.id);
  }
  return ids;
}

describe("contacts pagination (property): inserts during a walk never cause duplicates or gaps", () => {
  for (const seedValue of [1, 2, 3]) {
    it(`seed ${seedValue}: a full walk over 3,000 contacts with random inserts and page sizes`, async function () {
      this.timeout(60_000);
      const random = prng(seedValue);
      const org = newOrg();
      const existing = await seed(org, 3000, `s${seedValue}_`);
      const seen: string[] = [];
      let inserted = 0;
      let cursor: string | undefined;
      let pages = 0;
      do {
        const limit = 1 + Math.floor(random() * 100);
        // Random inserts between pages, some of them concurrent with the page request.
        const burst = Math.floor(random() * 4);
        const writes = Array.from({ length: burst }, (_, k) => {
          inserted++;
          const phone = `+1646${String(Math.floor(random() * 9_999_999)).padStart(7, "0")}`;
          if (k % 2 === 0) return resolveContact(org, phone);
          // A late commit of a transaction that started earlier: its created_at equals one of the seeded rows' (before or after the cursor).
          return harness().svc.deps.db.query(
            `INSERT INTO contacts.contacts (id, organization_id, phone, created_at)
             SELECT 'ct_late' || $3, $1, $2, created_at FROM contacts.contacts
             WHERE organization_id = $1 ORDER BY id OFFSET $4 LIMIT 1
             ON CONFLICT DO NOTHING`,
            [org, phone, `${seedValue}_${inserted}`, Math.floor(random() * 3000)],
          );
        });
        const qs = new URLSearchParams({ limit: String(limit), ...(cursor ? { cursor } : {}) });
        const [res] = await Promise.all([api(org).get(`/api/v1/contacts?${qs}`), ...writes]);
        expect(res.status).to.equal(200);
        expect(res.body.items.length).to.be.at.most(limit);
        seen.push(...res.body.items.map((c: { id: string }) => c.id));
        cursor = res.body.nextCursor;
        pages++;
      } while (cursor && pages < 1000);
      expect(cursor, "walk ended").to.equal(undefined);
      expect(new Set(seen).size, "no duplicates").to.equal(seen.length);
      const missing = [...existing].filter((id) => !seen.includes(id));
      expect(missing, "no gaps among the rows that existed when the walk began").to.deep.equal([]);
      expect(inserted).to.be.greaterThan(0);
    });
  }
});
