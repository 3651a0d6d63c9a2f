import { randomInt } from "node:crypto";
import type { LLamaContextualRepeatPenalty } from "node-llama-cpp";
import type { ChatRequest } from "../engine.ts";

/** The sampling options a request's generation gets (LlamaChat's; the direct path maps them alike). */
export interface SamplingOptions {
  /** 0 is greedy. node-llama-cpp's default is 0, so it is always passed. */
  temperature: number;
  topP: number;
  /** An unsigned 32-bit seed; node-llama-cpp's default is the clock, so one is always passed. */
  seed: number;
  /** `false` turns node-llama-cpp's default repeat penalty (1.1 over 64 tokens) off. */
  repeatPenalty: false | LLamaContextualRepeatPenalty;
}

/** Generated tokens that frequency and presence penalties look back over. */
const penaltyWindowTokens = 256;

/**
 * Maps a request's sampling parameters to node-llama-cpp's. OpenAI's frequency and presence
 * penalties are llama.cpp's (`logit -= count × frequency + presence`) over the tokens generated so
 * far, with no multiplicative repeat penalty and newlines counted like any token. top-k stays at
 * node-llama-cpp's 40: turning it off makes llama.cpp sort the whole vocabulary on every token, and
 * at temperatures up to 2 the tokens past the 40th carry next to no probability.
 */
export function mapSamplingOptions(request: ChatRequest): SamplingOptions {
  const penalized = request.frequencyPenalty !== 0 || request.presencePenalty !== 0;
  return {
    // OpenAI's defaults where the client sent none.
    temperature: request.temperature ?? 1,
    topP: request.topP ?? 1,
    seed: request.seed === undefined ? randomInt(0, 2 ** 32) : toUnsigned32(request.seed),
    repeatPenalty: penalized
      ? {
          lastTokens: penaltyWindowTokens,
          penalty: 1,
          frequencyPenalty: request.frequencyPenalty,
          presencePenalty: request.presencePenalty,
          penalizeNewLine: true,
        }
      : false,
  };
}

/**
 * llama.cpp's `LLAMA_DEFAULT_SEED` (0xFFFFFFFF): its sampler takes that seed to mean "a random
 * seed", so requests with it would not repeat.
 */
const randomSeedSentinel = 0xffffffff;

/**
 * llama.cpp seeds are unsigned 32-bit; node-llama-cpp clamps negative seeds to 0, so wrap them instead.
 * The one seed llama.cpp reads as "random" (what -1 and 4294967295 wrap to) becomes 0xFFFFFFFE, so
 * that every seed repeats (SPEC section 11); it then shares its sequence with -2, as there is no
 * unused 32-bit value left to give it.
 */
function toUnsigned32(seed: number): number {
  const integer = Number.isFinite(seed) ? Math.trunc(seed) : 0;
  const wrapped = ((integer % 2 ** 32) + 2 ** 32) % 2 ** 32;
  return wrapped === randomSeedSentinel ? randomSeedSentinel - 1 : wrapped;
}
