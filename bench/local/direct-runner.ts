import {
  type ChatHistoryItem,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
  resolveChatWrapper,
  type Token,
} from "node-llama-cpp";

/** Sampling shared by both sides of the comparison (Tollgate gets the same values per request). */
export interface BenchSampling {
  temperature: number;
  topP: number;
  /** The first sequence's seed; sequence i uses `seed + i`. */
  seed: number;
}

/** node-llama-cpp driven directly: one model, one context with `sequences` sequences. */
export interface DirectRunner {
  /**
   * Runs one generation of `tokens` tokens on each sequence at once (each from an empty state) and
   * returns the tokens generated and the wall time of the whole run.
   */
  generate(options: {
    tokens: number;
    sampling: BenchSampling;
  }): Promise<{ tokens: number; milliseconds: number }>;
  /**
   * Milliseconds from having the prompt text to the first generated token whose text is complete
   * (what a streaming consumer could show), on the first sequence, from an empty state.
   */
  timeToFirstText(sampling: BenchSampling): Promise<number>;
  dispose(): Promise<void>;
}

/**
 * Creates the minimal direct baseline: the same GGUF file, thread count, batch size and
 * per-sequence context size as the Tollgate side, and the prompt rendered once by the model's own
 * chat template from the same messages. Each generation tokenizes that prompt and evaluates it with
 * `sequence.evaluate`, the lowest-level generation loop node-llama-cpp offers.
 */
export async function createDirectRunner(options: {
  llama: Llama;
  modelPath: string;
  sequences: number;
  contextSize: number;
  threads: number;
  batchSize: number;
  history: ChatHistoryItem[];
}): Promise<DirectRunner> {
  const model: LlamaModel = await options.llama.loadModel({ modelPath: options.modelPath });
  const context: LlamaContext = await model.createContext({
    sequences: options.sequences,
    contextSize: options.contextSize,
    batchSize: Math.min(options.batchSize, options.contextSize),
    threads: options.threads,
  });
  const sequences: LlamaContextSequence[] = Array.from({ length: options.sequences }, () =>
    context.getSequence(),
  );
  const chatWrapper = resolveChatWrapper(model);
  const history: ChatHistoryItem[] = [...options.history, { type: "model", response: [] }];
  const promptText = chatWrapper.generateContextState({ chatHistory: history }).contextText;

  const evaluate = (sequence: LlamaContextSequence, sampling: BenchSampling, index: number) =>
    sequence.evaluate(promptText.tokenize(model.tokenizer), {
      temperature: sampling.temperature,
      topP: sampling.topP,
      topK: 40,
      seed: sampling.seed + index,
    });

  return {
    async generate({ tokens, sampling }) {
      await Promise.all(sequences.map((sequence) => sequence.clearHistory()));
      const startedAt = performance.now();
      const counts = await Promise.all(
        sequences.map(async (sequence, index) => {
          let count = 0;
          for await (const _token of evaluate(sequence, sampling, index)) {
            count += 1;
            if (count >= tokens) break;
          }
          return count;
        }),
      );
      return {
        tokens: counts.reduce((sum, count) => sum + count, 0),
        milliseconds: performance.now() - startedAt,
      };
    },
    async timeToFirstText(sampling) {
      const [sequence] = sequences;
      if (sequence === undefined) throw new Error("no sequence");
      await sequence.clearHistory();
      const startedAt = performance.now();
      const generated: Token[] = [];
      for await (const token of evaluate(sequence, sampling, 0)) {
        generated.push(token);
        const text = model.detokenize(generated);
        if (text !== "" && !text.endsWith("\uFFFD")) break;
        if (generated.length >= 16) break;
      }
      return performance.now() - startedAt;
    },
    async dispose() {
      await context.dispose();
      await model.dispose();
    },
  };
}
