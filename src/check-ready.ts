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
 * `/ready`'s answer: not ready while the store does not answer in time or a model of the start
 * (`startupEngines`) still loads; `reasons` says which.
 */
export async function checkReady(dependencies: {
  store: Store;
  registry: ModelRegistry;
  startupEngines: ReadonlySet<ChatEngine>;
}): Promise<{ ready: boolean; reasons: string[] }> {
  const { store, registry, startupEngines } = dependencies;
  const reasons: string[] = [];
  if (!(await answersWithin(store.hasAdminKey(), READY_STORE_TIMEOUT_MS)))
    reasons.push("the store does not answer");
  for (const entry of registry.list()) {
    const { engine } = entry;
    if (engine !== undefined && startupEngines.has(engine) && engine.status() === "loading")
      reasons.push(`model '${entry.model.id}' is loading`);
  }
  return { ready: reasons.length === 0, reasons };
}
