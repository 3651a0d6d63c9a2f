import { setTimeout as sleep } from "node:timers/promises";

/**
 * Polls `condition` every 10 ms until it holds. Gives up after `timeoutMs` (well inside the
 * test's own timeout, so the failure says what never happened) with an error naming `what`,
 * by default the condition's own source text.
 */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string = String(condition),
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting until ${what}`);
    await sleep(10);
  }
}
