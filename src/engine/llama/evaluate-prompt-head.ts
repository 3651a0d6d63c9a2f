import type { LlamaContextSequence, Token } from "node-llama-cpp";

/**
 * Evaluates all of a prompt but its last batch on `sequence` (whose state the caller has cleared),
 * one batch at a time, and answers the tokens left for the evaluation that samples the first
 * token (at least one), or `undefined` when `signal` aborted first.
 *
 * Why: llama.cpp cannot stop a batch it is decoding, and `sequence.evaluate` decodes a whole prompt
 * before it yields, so a client that left while its prompt was evaluated held the sequence until
 * the last prompt token (seconds for a long prompt), and was then charged for the token sampled
 * after it left (SPEC §4: a disconnect stops generation at once; a request that produced nothing
 * costs nothing). Here the abort is checked between batches: it takes effect within one batch.
 *
 * The head is cut at whole batches of the context's batch size (load-llama-model.ts; node-llama-cpp
 * makes llama.cpp's micro-batch the same size), so a prompt is decoded in exactly the batches that
 * one `evaluate` of the whole prompt makes: the logits, and so the text, stay the same (they can
 * differ in the last bits with other batch boundaries, run-llama-generation.ts), at the cost of an
 * abort waiting for the batch under way. Both paths call it: the direct path
 * (generate-directly.ts) evaluates the rest itself; LlamaChat finds the head in the sequence's state
 * and evaluates only the rest (its `adaptStateToTokens` keeps a matching prefix).
 */
export async function evaluatePromptHead(options: {
  sequence: LlamaContextSequence;
  tokens: readonly Token[];
  signal: AbortSignal;
}): Promise<Token[] | undefined> {
  const { sequence, tokens, signal } = options;
  const batchSize = Math.max(1, sequence.context.batchSize);
  // Whole batches only, and never the last token: the evaluation that samples needs one.
  const headLength = Math.floor((tokens.length - 1) / batchSize) * batchSize;
  for (let start = 0; start < headLength; start += batchSize) {
    if (signal.aborted) return undefined;
    await sequence.evaluateWithoutGeneratingNewTokens(tokens.slice(start, start + batchSize));
  }
  if (signal.aborted) return undefined;
  return tokens.slice(Math.max(0, headLength));
}
