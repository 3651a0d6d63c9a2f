import { AppError } from "../errors/app-error.ts";

/**
 * The 400 for a request that asks for log probabilities (`logprobs: true`) of a model whose
 * engine cannot give them (a local model: node-llama-cpp reports no token probabilities while it
 * generates, and a second evaluation of the answer would double its cost). Refused rather than
 * answered with `logprobs: null`, which a client could not tell from tokens that had none.
 */
export function refuseLogprobs(modelId: string): AppError {
  return new AppError(
    "invalid_value",
    `The model '${modelId}' does not give log probabilities: local models cannot. Leave out 'logprobs' and 'top_logprobs', or use an upstream model.`,
    { param: "logprobs" },
  );
}
