/**
 * `node bench/gateway/measure-billing-store.ts [SRC_FOLDER] [--concurrency=N] [--seconds=S] [--ordered-ids] [--owner]`:
 * the billing hot path alone, on a fresh SQLite file: N loops each reserving, yielding once (as
 * a request would while it runs) and settling, for S seconds. Prints reserve+settle pairs per
 * second, CPU µs per pair and the event loop's delay (p50, p99, max), the figure WAL checkpoints
 * on the event loop show up in, and the WAL file's peak size. SRC_FOLDER (default this checkout's `src`) lets two versions of
 * the store be measured one after the other on the same machine.
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import type { Store } from "../../src/store/store.ts";

const args = process.argv.slice(2);
const source = resolve(
  args.find((arg) => !arg.startsWith("--")) ?? new URL("../../src", import.meta.url).pathname,
);
const option = (name: string, fallback: number) => {
  const found = args.find((arg) => arg.startsWith(`--${name}=`));
  return found === undefined ? fallback : Number(found.slice(name.length + 3));
};
const concurrency = option("concurrency", 50);
// `--ordered-ids`: time-ordered reservation ids, as this checkout's billing makes them.
const { createReservationId } = await import("../../src/billing/create-reservation-id.ts");
const createId = args.includes("--ordered-ids") ? () => createReservationId(Date.now()) : () => randomUUID();
const seconds = option("seconds", 5);

const { openStore } = (await import(pathToFileURL(join(source, "store/open-store.ts")).href)) as {
  openStore: (url: string, options?: { owner?: boolean }) => Promise<Store>;
};
// `--owner`: the store as the server opens it (reservations held in memory), not as the CLI does.
const owner = args.includes("--owner");
const folder = mkdtempSync(join(tmpdir(), "tollgate-billing-bench-"));
const file = join(folder, "tollgate.db");
const store = await openStore(`sqlite:${file}`, { owner });
const accountId = randomUUID();
await store.insertAccount({ id: accountId, name: "bench", balanceNano: 10n ** 18n, createdAt: new Date() });

let pairs = 0;
const deadline = performance.now() + seconds * 1000;
async function loop(): Promise<void> {
  while (performance.now() < deadline) {
    const id = createId();
    const now = new Date();
    const reserved = await store.reserve({
      id,
      requestId: "req",
      accountId,
      keyPublicId: "key",
      model: "bench",
      amountNano: 1000n,
      replicaId: "bench",
      leaseExpiresAt: new Date(now.getTime() + 60_000),
      createdAt: now,
    });
    if (reserved !== "reserved") throw new Error(reserved);
    await new Promise((done) => setImmediate(done));
    await store.settle({
      id,
      requestId: "req",
      accountId,
      keyPublicId: "key",
      model: "bench",
      promptTokens: 10,
      completionTokens: 20,
      costNano: 500n,
      finishReason: "stop",
      errorCode: undefined,
      user: undefined,
      queueMs: undefined,
      firstTokenMs: 1,
      totalMs: 2,
      estimated: false,
      createdAt: now,
    });
    pairs += 1;
  }
}

/** The WAL's size now, in MB (SQLite keeps the file at its largest until it is truncated). */
const walMegabytes = () => {
  try {
    return statSync(`${file}-wal`).size / 2 ** 20;
  } catch {
    return 0;
  }
};
let walPeak = 0;
const walWatch = setInterval(() => {
  walPeak = Math.max(walPeak, walMegabytes());
}, 100);
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
const cpuBefore = process.cpuUsage();
const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, loop));
const elapsed = (performance.now() - started) / 1000;
const cpu = process.cpuUsage(cpuBefore);
delay.disable();
clearInterval(walWatch);
const walAtEnd = walMegabytes();
const problems = await store.audit();
await store.close();
rmSync(folder, { recursive: true, force: true });

const ms = (nanoseconds: number) => (nanoseconds / 1e6).toFixed(2);
process.stdout.write(
  `${source}${args.includes("--ordered-ids") ? " (ordered ids)" : ""}${owner ? " (owner)" : ""}: ${concurrency} loops, ${(pairs / elapsed).toFixed(0)} reserve+settle/s, ${((cpu.user + cpu.system) / pairs).toFixed(1)} CPU us/pair, event-loop delay p50 ${ms(delay.percentile(50))} ms p99 ${ms(delay.percentile(99))} ms max ${ms(delay.max)} ms, WAL peak ${walPeak.toFixed(1)} MB (${walAtEnd.toFixed(1)} MB at the end), audit problems ${problems.length}\n`,
);
