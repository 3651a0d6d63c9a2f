import type { ChatEngine, ModelStatus } from "../engine/engine.ts";

/** How often an engine that a reload made to replace a serving one is asked whether it has loaded. */
export const LOAD_CHECK_MS = 100;

/**
 * Calls `onSettled` once `engine` no longer reports `loading` (`available`, or `unavailable`: its
 * file missing or failed to load), unless the returned function was called first. Derived from
 * `ChatEngine.status()` alone, so that every engine type works as it is: a replacement that
 * waits for its engine to load (model-registry.ts) asks every {@link LOAD_CHECK_MS} (a
 * synchronous, cheap call) on a timer that keeps no process alive, and a switch-over comes at
 * most that long after the load.
 */
export function watchEngineLoad(
  engine: ChatEngine,
  onSettled: (status: Exclude<ModelStatus, "loading">) => void,
): () => void {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const check = () => {
    if (stopped) return;
    const status = engine.status();
    if (status === "loading") {
      timer = setTimeout(check, LOAD_CHECK_MS).unref();
      return;
    }
    stopped = true;
    onSettled(status);
  };
  check();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
