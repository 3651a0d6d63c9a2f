/** Context length used when a model file declares no trained context at all (rare, broken metadata). */
const fallbackContextLength = 2048;

/**
 * The context length a model serves with: the catalogue's value capped at the model file's trained
 * context; where the catalogue gives none, the trained context.
 */
export function resolveContextLength(options: { configured: number | undefined; trained: number }): number {
  const trained = options.trained > 0 ? options.trained : undefined;
  if (options.configured === undefined) return trained ?? fallbackContextLength;
  return trained === undefined ? options.configured : Math.min(options.configured, trained);
}
