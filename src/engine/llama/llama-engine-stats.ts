import type { ModelStatus } from "../engine.ts";

/** The sequences of one local model right now. */
export interface LlamaEngineStats {
  model: string;
  status: ModelStatus;
  /** Sequences in the model's context (`parallel`); 0 until the model is loaded. */
  sequences: number;
  /** Sequences lent to requests that run. */
  leased: number;
  /** Sequences free for the next request. */
  free: number;
  /** Requests waiting for a sequence. */
  waiting: number;
}

const openEngines = new Set<() => LlamaEngineStats>();

/**
 * Registers an open engine's stats reader; the returned function unregisters it (on close).
 * Benchmarks and soak tests read every open engine of the process with {@link readLlamaEngineStats}.
 */
export function registerLlamaEngineStats(read: () => LlamaEngineStats): () => void {
  openEngines.add(read);
  return () => {
    openEngines.delete(read);
  };
}

/** The stats of every local engine open in this process. */
export function readLlamaEngineStats(): LlamaEngineStats[] {
  return [...openEngines].map((read) => read());
}
