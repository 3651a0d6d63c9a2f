import type { ChatEngine } from "./engine/engine.ts";
import type { ModelRegistry } from "./models/model-registry.ts";
import type { Store } from "./store/store.ts";

/** How long `/ready` waits for the store: a probe must get its answer sooner than a query's timeout. */
const READY_STORE_TIMEOUT_MS = 2_000;

/** True when `promise` resolves within `ms`; false when it fails or takes longer. */
async function answersWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true as const), late]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `/ready`'s answer: not ready while the store does not answer in time, while charges wait for
 * the store to take them, or while a model of the start (`startupEngines`) still loads for the
 * first time (a download tried again after a failure does not count); `reasons`
 * says which.
 *
 * Charges wait when the store answers reads but fails writes (its disk full, its file locked by
 * another process): requests are then refused with 503 until a write goes through, and a balancer
 * should send them elsewhere. The waiting charges are tried again in the background on their own,
 * so readiness comes back without any request: a signal that only traffic could clear (the
 * store's last write failed) would keep a replica out of rotation for good. A probe that finds
 * the store answering tries the first of them at once, so readiness follows the store's return
 * by a probe's interval, not by the rest of a retry's pause.
 */
export async function checkReady(dependencies: {
  store: Store;
  registry: ModelRegistry;
  startupEngines: { has(engine: ChatEngine): boolean };
  /** Charges the store failed to take, waiting for their next attempt (BillingAdmission). */
  pendingSettlements: () => number;
  /** Tries the first of them now, the rest following if it goes through (BillingAdmission). */
  probePendingSettlements?: () => void;
}): Promise<{ ready: boolean; reasons: string[] }> {
  const { store, registry, startupEngines } = dependencies;
  const reasons: string[] = [];
  const answers = await answersWithin(store.hasAdminKey(), READY_STORE_TIMEOUT_MS);
  if (!answers) reasons.push("the store does not answer");
  const pending = dependencies.pendingSettlements();
  // A store that answers may take writes again: the probe finds out now, so the next probe
  // sees the charges recorded (they waited out pauses of up to 30 s, and the replica with them).
  if (pending > 0 && answers) dependencies.probePendingSettlements?.();
  if (pending > 0)
    reasons.push(
      `the store does not take writes: ${pending === 1 ? "a charge waits" : `${pending} charges wait`} to be recorded`,
    );
  for (const entry of registry.list()) {
    const { engine } = entry;
    // Its first load only: a download tried again in the background (its host down, or
    // stalling) took the server out of rotation for each attempt, minutes each, while the other
    // models served; between attempts it is unavailable, and ready.
    if (
      engine !== undefined &&
      startupEngines.has(engine) &&
      engine.status() === "loading" &&
      engine.retryingLoad !== true
    )
      reasons.push(`model '${entry.model.id}' is loading`);
  }
  return { ready: reasons.length === 0, reasons };
}
