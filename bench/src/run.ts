/**
 * `npm run bench -- <name> [<name> ...]`: runs the named benchmarks (all when
 * none is named) and prints their Markdown sections. Figures are recorded in
 * bench/RESULTS.md with the machine they were measured on.
 */
import { existsSync } from "node:fs";
import path from "node:path";

type Bench = { run(): Promise<string> };
const KNOWN = ["gateway", "messages", "contacts", "webhooks", "template-yield", "throttle-recovery", "analytics", "template-jobs", "overload", "inbound", "dispatcher-cpu", "floor"];

async function main(): Promise<void> {
  const available = KNOWN.filter((n) => existsSync(path.join(__dirname, `${n}.js`)));
  const wanted = process.argv.slice(2).filter((a) => !a.startsWith("-"));
  const names = wanted.length ? wanted : available;
  for (const name of names) {
    if (!available.includes(name)) {
      process.stderr.write(`unknown benchmark "${name}"; known: ${available.join(", ")}\n`);
      process.exit(2);
    }
    process.stdout.write(`\n## ${name}\n\n`);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const bench = require(`./${name}`) as Bench;
    process.stdout.write((await bench.run()) + "\n");
  }
  process.exit(0);
}

main().catch((err) => {
  process.stderr.write(`bench failed: ${(err as Error).stack}\n`);
  process.exit(1);
});
