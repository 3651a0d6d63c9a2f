/**
 * `npm run bench [-- SUITE ...]`: runs benchmark suites, each in `bench/SUITE/main.ts`
 * exporting `run(args: string[]): Promise<void>`. With no suite, runs `gateway` and `local`.
 * Benchmarks print ratios measured side by side in one run; they are not part of `npm test`.
 */
import { existsSync } from "node:fs";

const suites = ["gateway", "local", "soak", "instructions"] as const;
const [first, ...rest] = process.argv.slice(2);
const chosen = first === undefined ? ["gateway", "local"] : [first];

for (const suite of chosen) {
  const path = new URL(`./${suite}/main.ts`, import.meta.url);
  if (!(suites as readonly string[]).includes(suite) || !existsSync(path)) {
    process.stderr.write(`unknown benchmark suite '${suite}'; choose one of: ${suites.join(", ")}\n`);
    process.exit(2);
  }
  const module = (await import(path.href)) as { run(args: string[]): Promise<void> };
  await module.run(rest);
}
