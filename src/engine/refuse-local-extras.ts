import { AppError } from "../errors/app-error.ts";
import type { UpstreamExtras } from "./engine.ts";

/**
 * The 400 for upstream-only fields (ChatRequest.upstreamExtras) that a local model cannot apply,
 * else `undefined`, as refuse-logprobs.ts refuses `logprobs`: `logit_bias` (its keys are token
 * ids of the tokenizer the client had in mind, which means other tokens, or none, in a GGUF
 * model's) and `prediction` (node-llama-cpp has no predicted outputs). Refused rather than
 * ignored, since each changes what the client gets (a `logit_bias` whose biases are all 0, or
 * that has none, changes nothing and is taken). The others (`store`, `metadata`,
 * `service_tier`, `prompt_cache_key`, `safety_identifier`, `verbosity`, `modalities`, which the
 * edge lets through as `["text"]` only) change nothing a local model generates and are ignored.
 */
export function refuseLocalExtras(extras: UpstreamExtras, modelId: string): AppError | undefined {
  // Biases of 0 (or none, `{}`, which some clients send by default) change nothing.
  if (Object.values(extras.logit_bias ?? {}).some((bias) => bias !== 0)) {
    return new AppError(
      "invalid_value",
      `The model '${modelId}' does not apply 'logit_bias': local models do not apply logit_bias (its keys are token ids of another tokenizer). Leave it out, or use an upstream model.`,
      { param: "logit_bias" },
    );
  }
  if (extras.prediction !== undefined) {
    return new AppError(
      "invalid_value",
      `The model '${modelId}' does not take predicted outputs: local models do not apply 'prediction'. Leave it out, or use an upstream model.`,
      { param: "prediction" },
    );
  }
  return undefined;
}
