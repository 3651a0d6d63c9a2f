import { availableParallelism } from "node:os";
import type { Llama } from "node-llama-cpp";

/**
 * Threads for a model's context: the configured count, else the cores that do math minus one (left
 * to the HTTP edge, whose event loop drives every token), at least one. The cores are llama.cpp's
 * physical math cores, capped at the CPUs this process may run on (`os.availableParallelism()`,
 * which follows CPU affinity such as `taskset` or a container's cpuset): llama.cpp counts the
 * host's cores, and a process pinned to two of thirty-two must not start thirty-one threads.
 * node-llama-cpp's own default (all cores) starves the event loop; on the two-core machine of SPEC
 * §10 two threads gave 30-180 tokens/s on the small test model against 200-300 with one.
 */
export function resolveThreadCount(options: {
  configured: number | undefined;
  llama: Pick<Llama, "cpuMathCores">;
  /** Default: `os.availableParallelism()`. */
  availableCpus?: number;
}): number {
  if (options.configured !== undefined) return Math.max(1, Math.floor(options.configured));
  const cores = Math.min(options.llama.cpuMathCores, options.availableCpus ?? availableParallelism());
  return Math.max(1, cores - 1);
}
