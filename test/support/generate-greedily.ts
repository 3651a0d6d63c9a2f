import type { LlamaContextSequence, LlamaModel, Token } from "node-llama-cpp";

/**
 * Greedy generation with node-llama-cpp's lowest level, apart from any engine: every sampled
 * token, the end token too, up to `maxTokens`. Tests compare an engine's answers and counts with it.
 */
export async function generateGreedily(
  sequence: LlamaContextSequence,
  model: LlamaModel,
  prompt: string,
  maxTokens: number,
): Promise<{ text: string; tokens: number }> {
  const generated: Token[] = [];
  for await (const token of sequence.evaluate(model.tokenize(prompt, true), {
    temperature: 0,
    yieldEogToken: true,
  })) {
    generated.push(token);
    if (model.isEogToken(token) || generated.length >= maxTokens) break;
  }
  const textTokens = generated.filter((token) => !model.isEogToken(token));
  return { text: model.detokenize(textTokens), tokens: generated.length };
}
