import { byteCharacters, trainBytePairMerges } from "./byte-level-bpe.ts";
import { testModelCorpus } from "./test-model-corpus.ts";

/** `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`). */
export const tokenTypes = { normal: 1, control: 3 } as const;

/** The vocabulary of the test models: a byte-level BPE in GPT-2 style plus ChatML control tokens. */
export type TestModelVocabulary = {
  /** Token texts in byte-level form, indexed by token id. */
  readonly tokens: readonly string[];
  readonly tokenTypes: readonly number[];
  /** Merges in rank order, `"left right"`. */
  readonly merges: readonly string[];
  readonly endOfTextId: number;
  readonly imStartId: number;
  readonly imEndId: number;
};

const maximumMerges = 640;

let cachedVocabulary: TestModelVocabulary | undefined;

/** Builds (once per process) the deterministic test-model vocabulary. */
export function getTestModelVocabulary(): TestModelVocabulary {
  cachedVocabulary ??= createTestModelVocabulary();
  return cachedVocabulary;
}

function createTestModelVocabulary(): TestModelVocabulary {
  const tokens = [...byteCharacters];
  const known = new Set(tokens);
  const merges: string[] = [];
  for (const [left, right] of trainBytePairMerges({ corpus: testModelCorpus, maximumMerges })) {
    merges.push(`${left} ${right}`);
    const merged = left + right;
    if (!known.has(merged)) {
      known.add(merged);
      tokens.push(merged);
    }
  }
  const types: number[] = tokens.map(() => tokenTypes.normal);
  const addControl = (text: string): number => {
    tokens.push(text);
    types.push(tokenTypes.control);
    return tokens.length - 1;
  };
  const endOfTextId = addControl("<|endoftext|>");
  const imStartId = addControl("<|im_start|>");
  const imEndId = addControl("<|im_end|>");
  return { tokens, tokenTypes: types, merges, endOfTextId, imStartId, imEndId };
}
