import type { LlamaContextSequence, Token } from "node-llama-cpp";

/** What has `evaluate`: one sequence, or the class's prototype (every sequence). */
type EvaluateOwner = Pick<LlamaContextSequence, "evaluate">;

/**
 * Counts the tokens that come out of `evaluate` on `owner` after `signal` aborted, until
 * `restore`. LlamaChat samples with `evaluate` and checks its signal only once it has taken the
 * sampled token in, so the token that was being sampled when the client left is metered; the
 * count is what must not be charged. `owner` is one sequence (its own property wraps the class's
 * method, which stays untouched) or `LlamaContextSequence.prototype` (tests count every sequence).
 * LlamaChat's replacement tokens are passed on.
 */
export function countTokensAfterAbort(
  owner: EvaluateOwner,
  signal: AbortSignal,
): { readonly count: number; restore(): void } {
  const evaluate = owner.evaluate;
  const ownProperty = Object.hasOwn(owner, "evaluate");
  let count = 0;
  owner.evaluate = async function* (this: LlamaContextSequence, tokens, evaluateOptions) {
    // A sequence's own wrapper evaluates on that sequence, whatever it is called on.
    const iterator = evaluate.call(
      ownProperty ? this : (owner as LlamaContextSequence),
      tokens,
      evaluateOptions,
    );
    let input: Token | Token[] | undefined;
    try {
      while (true) {
        const result = await iterator.next(input);
        if (result.done === true) return;
        if (signal.aborted) count += 1;
        input = (yield result.value) ?? undefined;
      }
    } finally {
      await iterator.return();
    }
  };
  return {
    get count() {
      return count;
    },
    restore: () => {
      if (ownProperty) owner.evaluate = evaluate;
      else Reflect.deleteProperty(owner, "evaluate");
    },
  };
}
