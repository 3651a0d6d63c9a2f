import type { Llama } from "node-llama-cpp";

/**
 * Threads for a model's context: the configured count, else the physical cores that do math
 * minus one (left to the HTTP edge), at least one. node-llama-cpp's own default (all cores) starves
 * the event loop and, on small machines, was hundreds of times slower.
 */
export function resolveThreadCount(options: { configured: number | undefined; llama: Llama }): number {
  if (options.configured !== undefined) return Math.max(1, Math.floor(options.configured));
  return Math.max(1, options.llama.cpuMathCores - 1);
}
